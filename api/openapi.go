package api

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the API (openapi.json): every
// route the server registers, with its parameters and the schemas of its
// bodies. TestOpenAPIMatchesHandlers keeps it and the handlers in step.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document the server serves at
// /openapi.json.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// handleOpenAPI is GET /openapi.json. It needs no token: it describes the
// API, not the jobs.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
}
