package broker

import (
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker loggers (config resource type 8), as Kafka's Log4jController serves them to
// kafka-configs --entity-type broker-loggers: DescribeConfigs lists each logger with its level,
// IncrementalAlterConfigs SETs a level or DELETEs one back to the root's. ringbroker logs
// through one logger, so it has the one logger "root", whose level is the process's slog level;
// other names are answered as Kafka answers a logger that does not exist.

// rootLogger is the name of the broker's one logger.
const rootLogger = "root"

// logLevels holds the process's log level, when the process gave the broker one to change.
type logLevels struct {
	level atomic.Pointer[slog.LevelVar]
}

// SetLogLevel lets broker-logger configs change the level of the process's logger, which
// filters by lv. Without it, the root logger is described at INFO and cannot be changed.
func (b *Broker) SetLogLevel(lv *slog.LevelVar) { b.logLevels.level.Store(lv) }

// log4jLevels maps Kafka's (log4j's) level names to slog levels, most verbose first.
var log4jLevels = []struct {
	name  string
	level slog.Level
}{
	{"ALL", slog.LevelDebug - 8},
	{"TRACE", slog.LevelDebug - 4},
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", slog.LevelError + 4},
	{"OFF", slog.LevelError + 64},
}

// log4jName is the log4j name of a slog level: the most verbose name it does not exceed.
func log4jName(l slog.Level) string {
	name := log4jLevels[0].name
	for _, x := range log4jLevels {
		if l >= x.level {
			name = x.name
		}
	}
	return name
}

// rootLevel is the root logger's level now.
func (b *Broker) rootLevel() slog.Level {
	if lv := b.logLevels.level.Load(); lv != nil {
		return lv.Level()
	}
	return slog.LevelInfo
}

// describeLoggers answers DescribeConfigs for the broker loggers of this node.
func (b *Broker) describeLoggers(want func(string) bool) []kmsg.DescribeConfigsResponseResourceConfig {
	if !want(rootLogger) {
		return nil
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = rootLogger
	c.Value = kmsg.StringPtr(log4jName(b.rootLevel()))
	c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
	c.ConfigType = kmsg.ConfigTypeString
	return []kmsg.DescribeConfigsResponseResourceConfig{c}
}

// alterLoggers applies IncrementalAlterConfigs operations to the broker loggers, checking all
// of them before changing anything, with Kafka's errors.
func (b *Broker) alterLoggers(res kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (*kerr.Error, string) {
	if res.ResourceName != b.brokerResource() {
		return kerr.InvalidRequest, "Unexpected broker id, expected " + b.brokerResource() + " but received " + res.ResourceName
	}
	level := b.rootLevel()
	for _, c := range res.Configs {
		if c.Name != rootLogger {
			return kerr.InvalidConfig, "Logger " + c.Name + " does not exist!"
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			found := false
			want := ""
			if c.Value != nil {
				want = strings.ToUpper(strings.TrimSpace(*c.Value))
			}
			for _, x := range log4jLevels {
				if x.name == want {
					level, found = x.level, true
				}
			}
			if !found {
				return kerr.InvalidConfig, "Cannot set the log level of " + c.Name + " to " + want + " as it is not a supported log level. Valid log4j levels are ALL, DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN"
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			return kerr.InvalidRequest, "Removing the log level of the " + rootLogger + " logger is not allowed"
		default:
			return kerr.InvalidRequest, c.Op.String() + " operation is not allowed for the BROKER_LOGGER resource"
		}
	}
	if validateOnly {
		return nil, ""
	}
	lv := b.logLevels.level.Load()
	if lv == nil {
		return kerr.InvalidConfig, "this broker was started without a changeable log level"
	}
	lv.Set(level)
	b.logger.Info("root log level changed", "level", log4jName(level))
	return nil, ""
}
