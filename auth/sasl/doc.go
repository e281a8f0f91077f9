// Package sasl is the server side of Kafka's SASL mechanisms as pure logic: PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512 and OAUTHBEARER, the JAAS configuration values (sasl.jaas.config) that configure
// them, and the SCRAM credentials and OAuth token validators they check against. It touches no
// socket, and the clock and random source are the caller's; only JWKSFetcher does I/O, an HTTP
// GET of a JWKS endpoint.
//
// The broker builds one Authenticator per listener from its users (PlainUsers), its SCRAM
// credentials (ScramCredentials) and its OAuth token validator (TokenValidator), and advertises
// Authenticator.Mechanisms in SaslHandshake. When a client picks a mechanism the broker calls
// Authenticator.NewServer once for the connection and then Server.Step with the auth_bytes of
// each SaslAuthenticate request (or each raw size-prefixed token of a SaslHandshake v0 client),
// answering with the returned reply. When Step reports done, Server.Principal is the
// authenticated user (the authorization id), the name of the principal User:<name>. When Step
// fails, the error is an *AuthenticationError whose Error text is the message Kafka puts in
// SaslAuthenticate's error_message beside SASL_AUTHENTICATION_FAILED (58); its cause, which may
// say whether the user exists, is for the broker's log only.
//
// The messages, defaults and checks follow Apache Kafka's PlainSaslServer, ScramSaslServer,
// OAuthBearerSaslServer, JaasConfig, OAuthBearerUnsecuredValidatorCallbackHandler and
// BrokerJwtValidator, except where a comment says otherwise.
package sasl
