package coord

import "testing"

func TestAssignUniformBalanced(t *testing.T) {
	var ta, tb TopicInfo
	ta.ID[0], ta.Partitions, ta.Name = 1, 10, "a"
	tb.ID[0], tb.Partitions, tb.Name = 2, 3, "b"
	members := []assignMember{
		{id: "x", topics: []TopicInfo{ta, tb}},
		{id: "y", topics: []TopicInfo{ta}},
		{id: "z", topics: []TopicInfo{tb}},
	}
	got := assignUniform(members)
	total := 0
	for _, s := range got {
		total += len(s)
	}
	if total != 13 {
		t.Fatalf("assigned %d partitions; want 13", total)
	}
	for tp := range got["y"] {
		if tp.topic != ta.ID {
			t.Errorf("y got a partition of a topic it does not subscribe to")
		}
	}
	// Stickiness: recomputing with the result as previous changes nothing.
	for i := range members {
		members[i].prev = got[members[i].id]
	}
	again := assignUniform(members)
	for id, s := range got {
		if !again[id].equal(s) {
			t.Errorf("member %s: assignment moved without a change", id)
		}
	}
}
