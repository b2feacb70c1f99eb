package api

import (
	"embed"
	"io/fs"
	"net/http"
)

// web holds the dashboard: one page, its script and its style sheet, with
// no build step and nothing fetched from elsewhere.
//
//go:embed web
var web embed.FS

// dashboard serves the page at / and its files under /static/, under a
// content security policy that lets them load only from this server and
// run no inline script (guard sets the other security headers).
func (s *Server) dashboard(mux *http.ServeMux) {
	files, err := fs.Sub(web, "web")
	if err != nil {
		panic(err) // the embedded directory is always there
	}
	static := http.StripPrefix("/static/", http.FileServerFS(files))
	mux.Handle("GET /static/", page(static))
	mux.Handle("GET /{$}", page(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, files, "index.html")
	})))
}

func page(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", dashboardCSP)
		h.ServeHTTP(w, r)
	})
}
