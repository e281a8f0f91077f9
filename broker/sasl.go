package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"ringbroker/auth/sasl"
	"ringbroker/broker/meta"
)

// saslListener is the SASL side of a SASL_PLAINTEXT or SASL_SSL listener: the mechanisms it
// offers and the authenticator that checks credentials.
type saslListener struct {
	mechanisms []string
	auth       *sasl.Authenticator
	// jwks, when set, is the OAUTHBEARER key set fetched from an https endpoint; the broker
	// refreshes it while it runs.
	jwks *sasl.JWKSFetcher
}

// newServer starts the server side of an exchange of mechanism.
func (l *saslListener) newServer(mechanism string) (sasl.Server, error) {
	return l.auth.NewServer(mechanism)
}

// servedMechanisms are the SASL mechanisms ringbroker implements.
var servedMechanisms = []string{sasl.MechanismPlain, sasl.MechanismScramSHA256, sasl.MechanismScramSHA512, sasl.MechanismOAuthBearer}

// The OAUTHBEARER validation keys, Kafka's SaslConfigs.
var oauthConfigDefs = []brokerConfigDef{
	stringDef("sasl.oauthbearer.jwks.endpoint.url", "", func(c *Config) *string { return &c.Security.OAuthJWKSURL }, nil,
		"where OAUTHBEARER tokens' signing keys are (https:// or file:); empty: unsecured tokens are checked as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler does"),
	listDef("sasl.oauthbearer.expected.audience", "", func(c *Config) *[]string { return &c.Security.OAuthAudience }, nil,
		"audiences a signed token's aud claim must name one of"),
	stringDef("sasl.oauthbearer.expected.issuer", "", func(c *Config) *string { return &c.Security.OAuthIssuer }, nil,
		"the issuer a signed token's iss claim must be"),
	stringDef("sasl.oauthbearer.sub.claim.name", "sub", func(c *Config) *string { return &c.Security.OAuthSubClaim }, nil,
		"the claim naming a signed token's principal"),
	stringDef("sasl.oauthbearer.scope.claim.name", "scope", func(c *Config) *string { return &c.Security.OAuthScopeClaim }, nil,
		"the claim holding a signed token's scope"),
	secondsDef("sasl.oauthbearer.clock.skew.seconds", kindInt, "30", func(c *Config) *time.Duration { return &c.Security.OAuthClockSkew }, atLeast(0),
		"the clock difference allowed when checking a signed token's times"),
	msDef("sasl.oauthbearer.jwks.endpoint.refresh.ms", kindLong, "3600000", func(c *Config) *time.Duration { return &c.Security.OAuthJWKSRefresh }, atLeast(1),
		"how often the JWKS endpoint is fetched again"),
}

// saslListener builds the SASL settings of listener from sasl.enabled.mechanisms and, per
// mechanism, the listener's listener.name.<listener>.<mechanism>.sasl.jaas.config; SCRAM
// credentials, and those of delegation tokens when they are enabled, come from scram.
func (c *Config) saslListener(listener string, scram *scramFromImage) (*saslListener, error) {
	mechs := splitList(c.listenerValue(listener, "sasl.enabled.mechanisms"))
	if len(mechs) == 0 {
		return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", listener)
	}
	l := &saslListener{mechanisms: mechs}
	var opts sasl.Options
	for _, m := range mechs {
		jaas := c.listenerValue(listener, strings.ToLower(m)+".sasl.jaas.config")
		switch m {
		case sasl.MechanismPlain:
			mods, err := sasl.ParseJAAS(jaas)
			if err != nil {
				return nil, fmt.Errorf("listener %s: listener.name.%s.plain.sasl.jaas.config: %w", listener, strings.ToLower(listener), err)
			}
			users := sasl.PlainUsersFromJAAS(mods)
			if len(users) == 0 {
				return nil, fmt.Errorf("listener %s: PLAIN needs users: set listener.name.%s.plain.sasl.jaas.config to %s required user_<name>=\"<password>\" ...;",
					listener, strings.ToLower(listener), sasl.PlainLoginModule)
			}
			opts.PlainUsers = users
		case sasl.MechanismScramSHA256, sasl.MechanismScramSHA512:
			opts.ScramCredentials = scram
			if scram.tokens != nil {
				opts.TokenCredentials = scram
			}
		case sasl.MechanismOAuthBearer:
			v, fetcher, err := c.oauthValidator(listener, jaas)
			if err != nil {
				return nil, fmt.Errorf("listener %s: OAUTHBEARER: %w", listener, err)
			}
			opts.TokenValidator, l.jwks = v, fetcher
		default:
			return nil, fmt.Errorf("listener %s: SASL mechanism %s (sasl.enabled.mechanisms) is not served by ringbroker; set it to some of %s", listener, m, strings.Join(servedMechanisms, ", "))
		}
	}
	auth, err := sasl.NewAuthenticator(opts)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	l.auth = auth
	return l, nil
}

// oauthValidator is the OAUTHBEARER token validator of listener: signed tokens checked
// against a JWKS when sasl.oauthbearer.jwks.endpoint.url is set, otherwise unsecured tokens
// with the options of the listener's OAuthBearerLoginModule.
func (c *Config) oauthValidator(listener, jaas string) (sasl.TokenValidator, *sasl.JWKSFetcher, error) {
	get := func(key string) string { return c.listenerValue(listener, key) }
	url := get("sasl.oauthbearer.jwks.endpoint.url")
	if url == "" {
		var options map[string]string
		if jaas != "" {
			mod, err := sasl.ParseJAASModule(jaas)
			if err != nil {
				return nil, nil, err
			}
			options = mod.Options
		}
		v, err := sasl.NewUnsecuredValidator(options)
		return v, nil, err
	}
	cfg := sasl.DefaultJWTConfig()
	cfg.ExpectedAudiences = splitList(get("sasl.oauthbearer.expected.audience"))
	cfg.ExpectedIssuer = get("sasl.oauthbearer.expected.issuer")
	cfg.SubClaimName, cfg.ScopeClaimName = get("sasl.oauthbearer.sub.claim.name"), get("sasl.oauthbearer.scope.claim.name")
	cfg.ClockSkew = c.Security.OAuthClockSkew
	if path, ok := strings.CutPrefix(url, "file:"); ok {
		data, err := os.ReadFile(strings.TrimPrefix(path, "//"))
		if err != nil {
			return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
		}
		keys, err := sasl.ParseJWKS(data)
		if err != nil {
			return nil, nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url=%s: %w", url, err)
		}
		v, err := sasl.NewJWTValidator(cfg, keys)
		return v, nil, err
	}
	fetcher := &sasl.JWKSFetcher{URL: url, Refresh: c.Security.OAuthJWKSRefresh}
	v, err := sasl.NewJWTValidator(cfg, fetcher)
	return v, fetcher, err
}

// startJWKSFetchers fetches the JWKS of every listener that validates signed tokens and keeps
// them fresh until the broker stops. A first fetch that fails is logged: tokens are refused
// until a later fetch succeeds.
func (b *Broker) startJWKSFetchers() {
	for _, l := range b.listeners {
		if l.sasl == nil || l.sasl.jwks == nil {
			continue
		}
		f := l.sasl.jwks
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-b.stop
			cancel()
		}()
		fetchCtx, done := context.WithTimeout(ctx, 10*time.Second)
		if err := f.Fetch(fetchCtx); err != nil {
			b.logger.Error("fetch the OAUTHBEARER JWKS", "listener", l.name, "url", f.URL, "err", err)
		}
		done()
		go f.Run(ctx, func(err error) {
			b.logger.Warn("refresh the OAUTHBEARER JWKS", "listener", l.name, "url", f.URL, "err", err)
		})
	}
}

// scramFromImage looks SCRAM credentials, and the credentials of delegation tokens, up in the
// current metadata image.
type scramFromImage struct {
	image atomic.Pointer[func() *meta.Image]
	// tokens derives the credentials of delegation tokens; nil when they are disabled.
	tokens *tokenCreds
}

// newScramFromImage is the credential lookup of a broker configured by c, without an image
// until the broker sets it.
func newScramFromImage(c *Config) *scramFromImage {
	s := &scramFromImage{}
	if c.tokensEnabled() {
		s.tokens = &tokenCreds{secret: c.Security.TokenSecret}
	}
	return s
}

// current is the current metadata image, nil before there is one.
func (s *scramFromImage) current() *meta.Image {
	f := s.image.Load()
	if f == nil {
		return nil
	}
	return (*f)()
}

// ScramCredential implements sasl.ScramCredentials.
func (s *scramFromImage) ScramCredential(user, mechanism string) (sasl.Credential, bool) {
	im := s.current()
	if im == nil || im.Security == nil {
		return sasl.Credential{}, false
	}
	cred, ok := im.Security.Scram[user][mechanism]
	if !ok {
		return sasl.Credential{}, false
	}
	return sasl.Credential{Salt: cred.Salt, Iterations: int(cred.Iterations), StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}, true
}

// saslClientMessage is SaslAuthenticate's error message for a failed exchange: Kafka's text
// for the client, never the cause, which may say whether the user exists.
func saslClientMessage(err error, reauth bool) string {
	var ae *sasl.AuthenticationError
	if errors.As(err, &ae) {
		return ae.ClientMessage(reauth)
	}
	return err.Error()
}
