// Copyright 2026 The dra-failfast Authors.
// SPDX-License-Identifier: Apache-2.0

package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

const (
	// DefaultAddress is where the server listens unless configured
	// otherwise.
	DefaultAddress = ":8443"
	// DefaultPath is the path of the webhook unless configured otherwise:
	// the path in the ValidatingWebhookConfiguration's clientConfig.
	DefaultPath = "/validate"
	// DefaultShutdownTimeout is how long a stopping server waits for
	// requests in flight.
	DefaultShutdownTimeout = 10 * time.Second

	// maxHeaderBytes bounds the request headers; the API server sends a
	// few hundred bytes.
	maxHeaderBytes = 64 << 10
	// readHeaderTimeout bounds reading the request headers.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout is how long a connection may wait for its next request:
	// the API server reuses its connections to webhooks.
	idleTimeout = 90 * time.Second
)

// ServerConfig configures Start.
type ServerConfig struct {
	// DriverName is the driver whose opaque config entries get validated.
	// Required.
	DriverName string
	// Validate is the validator, the same that the driver passes to
	// ValidateClaim. Required.
	Validate ConfigValidator

	// Address is host:port to listen on; port 0 picks a free one. Empty
	// is DefaultAddress.
	Address string
	// CertFile and KeyFile are the PEM serving certificate (chain) and its
	// key, for example tls.crt and tls.key of a mounted Secret. Required.
	// They are read again when one of them changes (its modification
	// time, size or inode), at the next TLS handshake; while the new pair
	// does not load (one file written, the other not yet), the old one
	// is served.
	CertFile string
	KeyFile  string
	// Path is the path of the webhook; empty is DefaultPath.
	Path string
	// MaxRequestBytes bounds an admission request's body; 0 is
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Timeout bounds the handling of one admission request; 0 is
	// DefaultTimeout, at most MaxTimeout.
	Timeout time.Duration
	// ShutdownTimeout bounds the wait for requests in flight when the
	// server stops; 0 is DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// MaxConcurrent and MaxConcurrentLarge: see Handler.
	MaxConcurrent      int
	MaxConcurrentLarge int
	// GeneratedClaims and KubeClient: see Handler.
	GeneratedClaims GeneratedClaims
	KubeClient      kubernetes.Interface
}

// Server is a running webhook server (see Start).
type Server struct {
	addr     string
	done     chan struct{}
	err      error
	ready    atomic.Bool
	certs    *certReloader
	server   *http.Server
	stopOnce sync.Once
}

// Start serves the webhook over HTTPS until ctx is canceled:
//
//	POST <Path>    the webhook (Handler): admission.k8s.io/v1 AdmissionReview
//	GET  /healthz  200 "ok" while the process serves
//	GET  /readyz   200 "ok" while the server accepts requests, 503 while stopping
//	               or when the serving certificate has expired
//	GET  /metrics  the metrics in legacyregistry: DecisionsMetric, DurationMetric
//	               and whatever else the process registered there
//
// Nothing but TLS guards the endpoints: they say nothing secret, and the
// API server does not authenticate to webhooks unless configured to. Start
// returns once it listens, so that a port in use or an unreadable
// certificate fails at once. When ctx is canceled the server stops taking
// new connections, waits up to ShutdownTimeout for requests in flight, and
// closes Done.
func Start(ctx context.Context, cfg ServerConfig) (*Server, error) {
	RegisterMetrics()
	logger := klog.FromContext(ctx)
	if cfg.DriverName == "" {
		return nil, errors.New("admission webhook: the driver name must be set")
	}
	if cfg.Validate == nil {
		return nil, errors.New("admission webhook: the validator must be set")
	}
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, errors.New("admission webhook: the certificate and key files must be set")
	}
	if cfg.Address == "" {
		cfg.Address = DefaultAddress
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.Path[0] != '/' {
		return nil, fmt.Errorf("admission webhook: path %q does not start with /", cfg.Path)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	certs, err := newCertReloader(logger, cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("admission webhook: %w", err)
	}

	switch cfg.GeneratedClaims {
	case GeneratedClaimsDeny, GeneratedClaimsAllow:
	case GeneratedClaimsByOwner:
		if cfg.KubeClient == nil {
			return nil, errors.New("admission: GeneratedClaimsByOwner needs a KubeClient to look pods up")
		}
	default:
		return nil, fmt.Errorf("admission: unknown GeneratedClaims %q", cfg.GeneratedClaims)
	}
	handler := &Handler{DriverName: cfg.DriverName, Validate: cfg.Validate, MaxRequestBytes: cfg.MaxRequestBytes, Timeout: cfg.Timeout,
		MaxConcurrent: cfg.MaxConcurrent, MaxConcurrentLarge: cfg.MaxConcurrentLarge,
		GeneratedClaims: cfg.GeneratedClaims, KubeClient: cfg.KubeClient}
	s := &Server{done: make(chan struct{}), certs: certs}
	mux := http.NewServeMux()
	mux.Handle(cfg.Path, handler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, "shutting down")
			return
		}
		// The API server cannot talk to a webhook with an expired
		// certificate: say so where a probe or an operator looks.
		if notAfter := certs.notAfter(); !notAfter.IsZero() && time.Now().After(notAfter) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "serving certificate expired at %s\n", notAfter.UTC().Format(time.RFC3339))
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", legacyregistry.Handler())

	handlerTimeout := handler.maxTimeout()
	s.server = &http.Server{
		Handler:           mux,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout,
		// Reading 3 MiB from the API server takes milliseconds: this
		// only stops clients that trickle.
		ReadTimeout: readHeaderTimeout + handlerTimeout,
		// The handler answers within its timeout; the rest is for
		// reading and writing.
		WriteTimeout: readHeaderTimeout + handlerTimeout + 5*time.Second,
		IdleTimeout:  idleTimeout,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		// The logger, not the cancellation: requests in flight when ctx
		// ends get their answer (see Shutdown below).
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	listener, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("admission webhook: %w", err)
	}
	s.addr = listener.Addr().String()
	s.ready.Store(true)

	serveDone := make(chan error, 1)
	go func() {
		// The certificate comes from TLSConfig.GetCertificate.
		serveDone <- s.server.ServeTLS(listener, "", "")
	}()
	go func() {
		defer close(s.done)
		select {
		case <-ctx.Done():
		case err := <-serveDone:
			// Serving failed before anyone asked it to stop.
			s.ready.Store(false)
			s.err = fmt.Errorf("admission webhook: %w", err)
			logger.Error(err, "Admission webhook server failed")
			return
		}
		s.ready.Store(false)
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := s.server.Shutdown(shutdownCtx); err != nil {
			logger.Info("Admission webhook server did not stop in time, closing connections", "err", err)
			_ = s.server.Close()
		}
		<-serveDone
		logger.Info("Admission webhook server stopped")
	}()
	logger.Info("Serving admission webhook", "address", s.addr, "path", cfg.Path, "driver", cfg.DriverName, "certFile", cfg.CertFile, "keyFile", cfg.KeyFile)
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Done is closed once the server has stopped: after ctx was canceled and
// the requests in flight were answered, or when serving failed (see Err).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns why the server stopped on its own, nil while it runs and
// after a stop through ctx. Call it after Done is closed.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// certReloader serves the certificate in certFile and keyFile and loads
// them again when they change. Kubernetes updates a mounted Secret by
// swapping a symlink, which changes the inode that os.Stat sees; other tools
// rewrite the files in place, which changes modification time or size.
type certReloader struct {
	logger            klog.Logger
	certFile, keyFile string

	mu   sync.Mutex
	cert *tls.Certificate
	// certInfo and keyInfo describe the files that cert came from, or
	// that last failed to load, so that a broken pair is not read again
	// at every handshake.
	certInfo, keyInfo os.FileInfo
}

func newCertReloader(logger klog.Logger, certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{logger: logger, certFile: certFile, keyFile: keyFile}
	certInfo, keyInfo, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	r.cert, r.certInfo, r.keyInfo = &cert, certInfo, keyInfo
	return r, nil
}

func (r *certReloader) stat() (os.FileInfo, os.FileInfo, error) {
	certInfo, err := os.Stat(r.certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	keyInfo, err := os.Stat(r.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("serving key: %w", err)
	}
	return certInfo, keyInfo, nil
}

// GetCertificate implements tls.Config.GetCertificate. It costs two stat
// calls per handshake, nothing next to the handshake itself, and sees a
// change at once, without a goroutine or a polling interval.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certInfo, keyInfo, err := r.stat()
	if err != nil {
		// Files briefly missing while they are replaced: keep going.
		r.logger.V(2).Info("Serving the previous certificate", "err", err)
		return r.cert, nil
	}
	if sameFile(certInfo, r.certInfo) && sameFile(keyInfo, r.keyInfo) {
		return r.cert, nil
	}
	r.certInfo, r.keyInfo = certInfo, keyInfo
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.logger.Error(err, "Reloading the serving certificate failed, serving the previous one until the files change again", "certFile", r.certFile, "keyFile", r.keyFile)
		return r.cert, nil
	}
	r.cert = &cert
	r.logger.Info("Reloaded the serving certificate", "certFile", r.certFile, "keyFile", r.keyFile)
	return r.cert, nil
}

// notAfter is when the served certificate expires, zero if unknown.
func (r *certReloader) notAfter() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert == nil || r.cert.Leaf == nil {
		return time.Time{}
	}
	return r.cert.Leaf.NotAfter
}

func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
