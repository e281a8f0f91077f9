package broker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// LoadProperties applies a server.properties file to c.
func (c *Config) LoadProperties(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open config %s: %w", path, err)
	}
	defer f.Close()
	if err := c.ReadProperties(f); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// ReadProperties applies Java-properties style "key=value" lines ('#' and '!' comments).
func (c *Config) ReadProperties(r io.Reader) error {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		k, v, ok := cutProperty(s)
		if !ok {
			return fmt.Errorf("line %d: %q is not key=value", line, s)
		}
		if err := c.Set(k, v); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return sc.Err()
}

func cutProperty(s string) (string, string, bool) {
	i := strings.IndexAny(s, "=:")
	if i <= 0 {
		return "", "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
}

// Override applies one "key=value" given on the command line.
func (c *Config) Override(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("override %q: want key=value", kv)
	}
	return c.Set(strings.TrimSpace(k), strings.TrimSpace(v))
}
