package meta

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseVoters parses controller.quorum.voters: "id@host:port,..." into node id -> address.
func ParseVoters(val string) (map[int32]string, error) {
	out := map[int32]string{}
	for _, part := range strings.Split(val, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("voter %q: bad node id %q", part, id)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("voter %q: %w", part, err)
		}
		if _, dup := out[int32(n)]; dup {
			return nil, fmt.Errorf("voter %q: node id %d listed twice", part, n)
		}
		out[int32(n)] = addr
	}
	if len(out) == 0 {
		return nil, errors.New("no voters")
	}
	return out, nil
}
