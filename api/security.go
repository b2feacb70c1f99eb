package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Content security policies. The dashboard loads its script, style sheet
// and data from its own origin only, runs no inline script or style and
// may not be framed; the API's JSON answers may load nothing at all.
const (
	dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	apiCSP = "default-src 'none'; frame-ancestors 'none'"
)

// guard wraps the whole handler. Every answer carries the security
// headers. Without a token (the default) the server also defends itself
// against web pages the browser of someone on this host visits:
//
//   - DNS rebinding: a request whose Host is not localhost, an IP address,
//     the name of Options.Addr or one of Options.AllowedHosts is refused
//     (403), whatever its method.
//   - Cross-site requests: a request that changes something (any method
//     but GET, HEAD and OPTIONS) is refused (403) when its Origin is not
//     the server's own (scheme, host and port) or its Sec-Fetch-Site says
//     it came from another site, and (415) when it has a body or a content
//     type that is not application/json, which no cross-site form can
//     send without a preflight the server never grants: it sends no CORS
//     headers.
//
// With a token the bearer token is what keeps others out (authorized):
// a web page cannot send it.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "no-referrer")
		hdr.Set("Content-Security-Policy", apiCSP)
		hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.opts.Token == "" {
			if status, msg := s.refusal(r); status != 0 {
				s.logger.Warn("request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host,
					"origin", r.Header.Get("Origin"), "status", status, "why", msg)
				writeError(w, status, "%s", msg)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// safeMethod reports whether method only reads.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// refusal says why a request to a server without a token is refused (a
// status and a message), or 0 when it is not.
func (s *Server) refusal(r *http.Request) (int, string) {
	if !s.hostAllowed(r.Host) {
		return http.StatusForbidden, fmt.Sprintf("Host %q is not a name of this server: without a token it answers only to "+
			"localhost, IP addresses and the allowed hosts (DNS-rebinding protection); set a token, or add the name to "+
			"the allowed hosts (api.Options.AllowedHosts)", r.Host)
	}
	if safeMethod(r.Method) {
		return 0, ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return http.StatusForbidden, fmt.Sprintf("cross-site request refused (Sec-Fetch-Site: %s): without a token, "+
			"%s requests must come from this server's own pages or from a client that is not a browser", site, r.Method)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if own := s.origin(r); !sameOrigin(origin, own) {
			return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Origin %s is not this server's (%s); "+
				"without a token, %s requests must come from the same origin or from a client that is not a browser", origin, own, r.Method)
		}
	}
	ct := r.Header.Get("Content-Type")
	if ct != "" || r.ContentLength != 0 {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			if ct == "" {
				ct = "none"
			}
			return http.StatusUnsupportedMediaType, fmt.Sprintf("content type %s refused: %s requests take a JSON body "+
				"(Content-Type: application/json), or none", ct, r.Method)
		}
	}
	return 0, ""
}

// origin is the request's own origin: its scheme and Host.
func (s *Server) origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// sameOrigin compares two origins (scheme://host[:port]) as browsers do,
// with the scheme's default port when none is given.
func sameOrigin(a, b string) bool {
	ca, ok := canonicalOrigin(a)
	if !ok {
		return false
	}
	cb, ok := canonicalOrigin(b)
	return ok && ca == cb
}

func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
		return "", false // "null" and the like
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", false
		}
	}
	return scheme + "://" + net.JoinHostPort(canonicalHost(u.Hostname()), port), true
}

// canonicalHost lower-cases a host name and drops brackets and a trailing
// dot.
func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// hostOf returns the host of a Host header or address (without its port).
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return canonicalHost(h)
	}
	return canonicalHost(hostport)
}

// hostAllowed reports whether a request's Host names this server: an IP
// address (a page the browser loaded from an IP address is that address's,
// not a rebound name's), localhost, the host of Options.Addr, or one of
// Options.AllowedHosts ("*.example.com" for every name under example.com).
// A request without a Host (HTTP/1.0, not from a browser) is allowed.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostOf(hostport)
	if host == "" || host == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, a := range s.allowedHosts {
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

// allowedHosts returns the names the server answers to without a token
// besides localhost and IP addresses.
func allowedHosts(opts Options) []string {
	var out []string
	if h := hostOf(opts.Addr); h != "" {
		if _, err := netip.ParseAddr(h); err != nil {
			out = append(out, h)
		}
	}
	for _, h := range opts.AllowedHosts {
		if h = hostOf(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// authorized requires the bearer token when one is configured. The
// comparison takes the same time whatever the token sent: both sides are
// hashed first, so neither the length nor a common prefix shows.
func (s *Server) authorized(h http.Handler) http.Handler {
	if s.opts.Token == "" {
		return h
	}
	want := sha256.Sum256([]byte(s.opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		ok := subtle.ConstantTimeCompare(got[:], want[:]) == 1
		if !strings.EqualFold(scheme, "Bearer") || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			writeError(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer <token>)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LoopbackAddr reports whether addr ("host:port") listens on the loopback
// interface only: localhost or a loopback IP address. An empty host (every
// interface), an unspecified address (0.0.0.0, ::) and any other name or
// address are not. A program that serves the API without a token should
// refuse any other address: without a token the API keeps out web pages,
// not whoever reaches the port.
func LoopbackAddr(addr string) bool {
	host := hostOf(addr)
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
