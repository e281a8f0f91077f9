package broker

// Metadata (key 3), versions 0-13.
//
// Behavior: answers with the brokers, the cluster id, the controller and the requested topics (all
// topics for a null list). A named unknown topic is created when the request allows it and
// auto.create.topics.enable is set, with num.partitions and default.replication.factor; the
// creation commits to the metadata log before the answer, so the answer already carries the new
// partitions. Runs off the ring goroutine because auto-creation fsyncs the metadata log.
//
// Version notes: before v1 an empty topic list also means all topics; v4 adds the request's
// allow-auto-creation flag (earlier versions always allow it); v10 names topics by id too.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/broker/meta"
)

var metadataAPI = &api{key: kmsg.Metadata, minVersion: 0, maxVersion: 13, keepsRequest: true, handle: handleMetadata}

func handleMetadata(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	im := b.meta.Image()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if !all {
		allowAuto := req.Version < 4 || req.AllowAutoTopicCreation
		var toCreate []topicSpec
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue
			}
			if _, ok := im.Topics[*t.Topic]; !ok && allowAuto && b.cfg.AutoCreateTopics && validateTopicName(*t.Topic) == "" {
				toCreate = append(toCreate, topicSpec{name: *t.Topic, partitions: -1, rf: -1})
			}
		}
		if len(toCreate) > 0 {
			for i, res := range b.createTopics(toCreate, false) {
				if res.err != nil && res.err != kerr.TopicAlreadyExists {
					b.logger.Warn("auto-create topic", "topic", toCreate[i].name, "err", res.err.Message, "detail", res.message)
				}
			}
			im = b.meta.Image()
		}
	}

	resp.ClusterID = kmsg.StringPtr(im.ClusterID)
	resp.ControllerID = b.controllerIDFor(im)
	resp.Brokers = b.metadataBrokers(im, rc.cs.listenerName())
	if all {
		for _, name := range im.SortedTopicNames() {
			resp.Topics = append(resp.Topics, metadataTopic(im.Topics[name], req.IncludeTopicAuthorizedOperations))
		}
	} else {
		for _, t := range req.Topics {
			var topic *meta.Topic
			if t.Topic != nil {
				topic = im.Topics[*t.Topic]
			} else {
				topic = im.TopicsByID[meta.UUID(t.TopicID)]
			}
			if topic == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = t.Topic
				mt.TopicID = t.TopicID
				switch {
				case t.Topic == nil:
					mt.ErrorCode = kerr.UnknownTopicID.Code
				case validateTopicName(*t.Topic) != "":
					mt.ErrorCode = kerr.InvalidTopicException.Code
				default:
					mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(topic, req.IncludeTopicAuthorizedOperations))
		}
	}
	rc.respond(resp)
}

// metadataBrokers lists the registered brokers at their endpoints of listener (a broker
// without that listener is left out, as Kafka); before this broker has registered (it does so
// at start), it lists itself from the config.
func (b *Broker) metadataBrokers(im *meta.Image, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, br := range sortedBrokers(im) {
		if br.Fenced {
			continue
		}
		host, port, ok := br.Endpoint(listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = br.NodeID
		mb.Host = host
		mb.Port = port
		if br.Rack != "" {
			mb.Rack = kmsg.StringPtr(br.Rack)
		}
		out = append(out, mb)
	}
	if len(out) == 0 {
		adv, ok := b.advertisedListener(listener)
		if !ok {
			adv = b.advertised()
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = b.cfg.NodeID
		mb.Host = adv.Host
		mb.Port = int32(adv.Port)
		out = append(out, mb)
	}
	return out
}

// topicAllOperations is the authorized-operations bit set for a topic with every operation
// allowed (no authorizer): READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS.
const topicAllOperations = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

func metadataTopic(t *meta.Topic, includeOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	if includeOps {
		mt.AuthorizedOperations = topicAllOperations
	}
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// isInternalTopic reports Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}
