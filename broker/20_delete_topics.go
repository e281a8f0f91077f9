package broker

// DeleteTopics (key 20), versions 1-6.
//
// Behavior: deletes topics: one RemoveTopic record each in the metadata log, after which the
// partitions' logs are closed and their directories removed (a directory left by a crash in
// between is removed when a topic of the same name is created again). Internal topics cannot be
// deleted. Authorization, as Kafka's ControllerApis: DELETE on the cluster, or else on each
// topic (TOPIC_AUTHORIZATION_FAILED), a topic the principal may not DESCRIBE being refused
// before its existence is disclosed.
//
// Version notes: v6 names topics by name or by id.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringbroker/auth/acl"
	"ringbroker/broker/meta"
)

var deleteTopicsAPI = &api{key: kmsg.DeleteTopics, minVersion: 1, maxVersion: 6, keepsRequest: true, handle: handleDeleteTopics}

func handleDeleteTopics(b *Broker, rc *reqCtx, r kmsg.Request) {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	type target struct {
		name *string
		id   meta.UUID
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			targets = append(targets, target{name: kmsg.StringPtr(n)})
		}
	}
	// As Kafka's ControllerApis: DELETE on the cluster allows every topic; otherwise a topic
	// needs DELETE, and one the principal may not even DESCRIBE is refused before its
	// existence is looked at (named by id, its name is then left out).
	z := rc.authorizer()
	clusterDelete := z.mayCluster(acl.OpDelete)
	describable := func(name string) bool { return clusterDelete || z.may(acl.OpDescribe, acl.ResourceTopic, name) }
	deletable := func(name string) bool { return clusterDelete || z.may(acl.OpDelete, acl.ResourceTopic, name) }
	mq := rc.mutationQuota(false)
	b.controllerMu.Lock()
	changed := false
	for _, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = tg.name
		rt.TopicID = tg.id
		im := b.meta.Image()
		var topic *meta.Topic
		if tg.name != nil {
			topic = im.Topics[*tg.name]
		} else {
			topic = im.TopicsByID[tg.id]
		}
		switch {
		case !b.cfg.DeleteTopicEnable:
			rt.ErrorCode = kerr.TopicDeletionDisabled.Code
		case topic == nil && tg.name == nil:
			rt.ErrorCode = kerr.UnknownTopicID.Code
		case tg.name == nil && !deletable(topic.Name):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if describable(topic.Name) {
				rt.Topic = kmsg.StringPtr(topic.Name)
			}
		case tg.name != nil && (!describable(*tg.name) || topic != nil && !deletable(*tg.name)):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case topic == nil:
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case isInternalTopic(topic.Name):
			rt.ErrorCode = kerr.InvalidTopicException.Code
			rt.ErrorMessage = kmsg.StringPtr("internal topics cannot be deleted")
		case !mq.take(len(topic.Partitions)):
			rt.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
			rt.ErrorMessage = kmsg.StringPtr(throttledMessage)
		default:
			rt.Topic = kmsg.StringPtr(topic.Name)
			rt.TopicID = topic.ID
			if _, err := b.meta.Commit([]meta.Record{{Type: meta.TypeRemoveTopic, TopicID: topic.ID}}); err != nil {
				rt.ErrorCode = kerr.UnknownServerError.Code
				rt.ErrorMessage = kmsg.StringPtr(err.Error())
			} else {
				changed = true
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if changed {
		if err := b.syncPartitions(); err != nil {
			b.logger.Error("close deleted partitions", "err", err)
		}
	}
	b.controllerMu.Unlock()
	resp.ThrottleMillis = mq.throttle(rc)
	rc.respond(resp)
}
