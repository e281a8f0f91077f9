package broker

import (
	"fmt"
	"slices"
	"strings"
)

// saslListener is the SASL side of a SASL_PLAINTEXT or SASL_SSL listener: the mechanisms it
// offers and what each checks credentials against.
type saslListener struct {
	mechanisms []string
	// newServer starts the server side of an exchange of one of the mechanisms.
	newServer func(mechanism string) (saslServer, error)
}

// servedMechanisms are the SASL mechanisms ringbroker implements.
var servedMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// saslListener builds the SASL settings of listener from sasl.enabled.mechanisms and the
// listener's listener.name.<listener>.<mechanism>.sasl.jaas.config.
func (c *Config) saslListener(listener string) (*saslListener, error) {
	mechs := splitList(c.listenerValue(listener, "sasl.enabled.mechanisms"))
	if len(mechs) == 0 {
		return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", listener)
	}
	for _, m := range mechs {
		if !slices.Contains(servedMechanisms, m) {
			return nil, fmt.Errorf("listener %s: SASL mechanism %s (sasl.enabled.mechanisms) is not served by ringbroker; set it to some of %s", listener, m, strings.Join(servedMechanisms, ", "))
		}
	}
	return nil, fmt.Errorf("listener %s: SASL listeners are being built (issue 13) and cannot be started yet", listener)
}

// saslServer is the broker's side of one SASL exchange.
type saslServer interface {
	// Step answers one client message; done once the client is authenticated.
	Step(msg []byte) (reply []byte, done bool, err error)
	// Principal is the authenticated user's name once Step is done.
	Principal() string
}

// saslClientMessage is SaslAuthenticate's error message for a failed exchange.
func saslClientMessage(err error, reauth bool) string {
	return err.Error()
}
