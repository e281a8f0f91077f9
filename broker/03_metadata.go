package broker

// Metadata (key 3), versions 0-13.
//
// Behavior: answers with the brokers, the cluster id, the controller and the requested topics (all
// topics for a null list). A named unknown topic is created when the request allows it and
// auto.create.topics.enable is set, with num.partitions and default.replication.factor, as
// Kafka under KRaft: the creation is started, not awaited, and the topic is answered
// UNKNOWN_TOPIC_OR_PARTITION until it exists (autocreate.go).
// Authorization, as Kafka's: topics the principal may not DESCRIBE are left out of an
// all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (without their id, or
// by id without their name); auto-creation needs CREATE on the cluster or on the topic
// (TOPIC_AUTHORIZATION_FAILED otherwise). The authorized operations asked for (topics v8+,
// cluster v8-10) are computed from the ACLs; without an authorizer every operation.
//
// Version notes: before v1 an empty topic list also means all topics; v4 adds the request's
// allow-auto-creation flag (earlier versions always allow it); v10 names topics by id too.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var metadataAPI = &api{key: kmsg.Metadata, minVersion: 0, maxVersion: 13, keepsRequest: true, handle: handleMetadata, inline: true}

func handleMetadata(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	im := b.meta.Image()
	z := rc.authorizer()
	describable := z.topicChecks(acl.OpDescribe)

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	// createDenied are the unknown topics the request would auto-create but the principal may
	// not: CREATE on the cluster or on the topic is needed, as Kafka's.
	var createDenied map[string]bool
	if !all {
		allowAuto := req.Version < 4 || req.AllowAutoTopicCreation
		var toCreate []topicSpec
		clusterCreate := -1 // unknown, asked once when needed
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue
			}
			name := *t.Topic
			if _, ok := im.Topics[name]; ok || !allowAuto || !b.cfg.AutoCreateTopics || !describable.may(name) {
				continue
			}
			if clusterCreate < 0 {
				clusterCreate = 0
				if z.mayCluster(acl.OpCreate) {
					clusterCreate = 1
				}
			}
			if clusterCreate == 0 && !z.may(acl.OpCreate, acl.ResourceTopic, name) {
				if createDenied == nil {
					createDenied = make(map[string]bool)
				}
				createDenied[name] = true
				continue
			}
			if validateTopicName(name) == "" {
				toCreate = append(toCreate, topicSpec{name: name, partitions: -1, rf: -1})
			}
		}
		if len(toCreate) > 0 {
			b.autoCreate(toCreate)
		}
	}

	resp.ClusterID = kmsg.StringPtr(im.ClusterID)
	resp.ControllerID = b.controllerIDFor(im)
	resp.Brokers = b.metadataBrokers(im, rc.cs.listenerName())
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if z.mayCluster(acl.OpDescribe) {
			resp.AuthorizedOperations = z.operations(acl.ResourceCluster, acl.ClusterName)
		}
	}
	// withOps sets a described topic's authorized operations when the request asks for them.
	withOps := func(mt kmsg.MetadataResponseTopic, name string) kmsg.MetadataResponseTopic {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = z.operations(acl.ResourceTopic, name)
		}
		return mt
	}
	if all {
		// Topics the principal may not DESCRIBE are left out, as if they did not exist.
		for _, name := range im.SortedTopicNames() {
			if describable.may(name) {
				resp.Topics = append(resp.Topics, withOps(b.metadataTopic(im.Topics[name]), name))
			}
		}
	} else {
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, b.requestedTopic(im, t, &describable, createDenied, withOps))
		}
	}
	rc.respond(resp)
}

// requestedTopic answers one topic a Metadata request names, as Kafka's
// handleTopicMetadataRequest: an unknown id is UNKNOWN_TOPIC_ID; a topic the principal may not
// DESCRIBE is TOPIC_AUTHORIZATION_FAILED without its id (named by id: without its name), so its
// existence is not disclosed; one it would have auto-created but may not CREATE is
// TOPIC_AUTHORIZATION_FAILED too; an unknown name is INVALID_TOPIC_EXCEPTION or
// UNKNOWN_TOPIC_OR_PARTITION.
func (b *Broker) requestedTopic(im *meta.Image, t kmsg.MetadataRequestTopic, describable *topicNames, createDenied map[string]bool,
	withOps func(kmsg.MetadataResponseTopic, string) kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	if t.Topic == nil {
		topic := im.TopicsByID[meta.UUID(t.TopicID)]
		switch {
		case topic == nil:
			mt.TopicID, mt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
			return mt
		case !describable.may(topic.Name):
			// Topic ids are not sensitive, as Kafka says: the id stays, the name does not.
			mt.TopicID, mt.ErrorCode = t.TopicID, kerr.TopicAuthorizationFailed.Code
			return mt
		}
		return withOps(b.metadataTopic(topic), topic.Name)
	}
	name := *t.Topic
	mt.Topic = t.Topic
	switch {
	case !describable.may(name):
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return mt
	case createDenied[name]:
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		mt.IsInternal = isInternalTopic(name)
		return mt
	}
	topic := im.Topics[name]
	if topic == nil {
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		mt.IsInternal = isInternalTopic(name)
		if validateTopicName(name) != "" {
			mt.ErrorCode = kerr.InvalidTopicException.Code
		}
		return withOps(mt, name)
	}
	return withOps(b.metadataTopic(topic), name)
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

// metadataTopic is the Metadata answer for topic t. This broker's replicas in an offline log
// dir are listed as offline replicas, and a partition it leads from one has no leader, as the
// controller makes it in Kafka once the broker reports the dir offline.
func (b *Broker) metadataTopic(t *meta.Topic) kmsg.MetadataResponseTopic {
	tbl := b.parts.Load()
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader, mp.OfflineReplicas = b.offlineView(tbl, t.ID, p)
		if mp.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// offlineView is partition p's leader and offline replicas as this broker answers them: the
// replicas the controller marked offline, and its own replica in an offline log dir, which it
// may know of before the controller does; a partition led by an offline replica has no leader.
func (b *Broker) offlineView(tbl *partitionTable, topic meta.UUID, p meta.Partition) (leader int32, offline []int32) {
	offline = append([]int32{}, p.Offline...)
	self := b.cfg.NodeID
	if tbl.offlineAt(topic, p.Index) && !p.IsOffline(self) {
		offline = append(offline, self)
	}
	leader = p.Leader
	if slices.Contains(offline, leader) {
		leader = -1
	}
	return leader, offline
}

// isInternalTopic reports Kafka's internal topics.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}
