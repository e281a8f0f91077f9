package sasl

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Kafka's defaults for fetching a JWKS endpoint.
const (
	// DefaultJWKSRefresh is sasl.oauthbearer.jwks.endpoint.refresh.ms: one hour.
	DefaultJWKSRefresh = time.Hour
	// DefaultJWKSRetryBackoff is sasl.oauthbearer.jwks.endpoint.retry.backoff.ms: 100 ms.
	DefaultJWKSRetryBackoff = 100 * time.Millisecond
	// DefaultJWKSRetryBackoffMax is sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms: 10 s.
	DefaultJWKSRetryBackoffMax = 10 * time.Second
)

// maxJWKSBytes bounds a JWKS document; real ones are a few kilobytes.
const maxJWKSBytes = 1 << 20

// JWKSFetcher keeps the key set of an HTTP(S) JWKS endpoint (sasl.oauthbearer.jwks.endpoint.url)
// for a JWTValidator: Fetch gets it once, Run again every Refresh, retrying failures with
// exponential backoff from RetryBackoff to RetryBackoffMax and keeping the last good set
// meanwhile. It is the package's only I/O. Unlike Kafka it does not fetch early when a token
// names an unknown kid; such a token fails until the next refresh. A file: URL is the broker's
// to read, once, with ParseJWKS, as Kafka reads one at startup only.
type JWKSFetcher struct {
	// URL is the endpoint.
	URL string
	// Client makes the requests; nil is a client with a 10 s timeout.
	Client *http.Client
	// Refresh is the time between fetches; zero is DefaultJWKSRefresh.
	Refresh time.Duration
	// RetryBackoff is the first wait after a failed fetch; zero is DefaultJWKSRetryBackoff.
	RetryBackoff time.Duration
	// RetryBackoffMax bounds the doubling waits; zero is DefaultJWKSRetryBackoffMax.
	RetryBackoffMax time.Duration

	keys atomic.Pointer[KeySet]
}

// Keys returns the last key set fetched, or nil before the first success.
func (f *JWKSFetcher) Keys() *KeySet { return f.keys.Load() }

// Fetch gets and parses the endpoint's key set and makes it current.
func (f *JWKSFetcher) Fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return fmt.Errorf("fetch JWKS %s: %w", f.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	client := f.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch JWKS %s: %w", f.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch JWKS %s: HTTP status %s", f.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("fetch JWKS %s: %w", f.URL, err)
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("fetch JWKS %s: document larger than %d bytes", f.URL, maxJWKSBytes)
	}
	set, err := ParseJWKS(body)
	if err != nil {
		return fmt.Errorf("fetch JWKS %s: %w", f.URL, err)
	}
	f.keys.Store(set)
	return nil
}

// Run fetches the key set every Refresh until ctx ends, retrying a failed fetch after
// RetryBackoff, doubling up to RetryBackoffMax, and reporting each failure to onError (which may
// be nil). It waits a full Refresh before its first fetch: the broker calls Fetch at start.
func (f *JWKSFetcher) Run(ctx context.Context, onError func(error)) {
	refresh := orDefault(f.Refresh, DefaultJWKSRefresh)
	backoff := orDefault(f.RetryBackoff, DefaultJWKSRetryBackoff)
	maxBackoff := orDefault(f.RetryBackoffMax, DefaultJWKSRetryBackoffMax)
	wait := refresh
	retry := backoff
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.Fetch(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if onError != nil {
				onError(err)
			}
			wait = retry
			retry = min(2*retry, maxBackoff)
		} else {
			wait = refresh
			retry = backoff
		}
		t.Reset(wait)
	}
}

// orDefault returns d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
