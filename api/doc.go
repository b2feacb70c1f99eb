// Package api owns the HTTP API and web dashboard of Sluice jobs: JSON over
// net/http with Flink's REST paths, shapes and field names, the dashboard
// (plain HTML, JS and SVG embedded in the binary) on the same address, and
// a client for both that the sluice command uses.
//
//	GET   /overview                               jobs by state, task managers, slots
//	GET   /jobs                                   ids and states
//	GET   /jobs/overview                          name, state, times, task counts
//	GET   /jobs/:jobid                            vertices, their metrics, the plan
//	PATCH /jobs/:jobid?mode=cancel                cancel
//	GET   /jobs/:jobid/checkpoints                counts, summary, latest, history
//	GET   /jobs/:jobid/exceptions                 the failures that ended attempts, newest first
//	POST  /jobs/:jobid/checkpoints                {"checkpointType"}: a checkpoint now (Flink 1.19)
//	GET   /jobs/:jobid/checkpoints/:triggerid     its status, its id once completed
//	GET   /jobs/:jobid/checkpoints/config         the checkpoint settings
//	GET   /jobs/:jobid/checkpoints/details/:cid   one checkpoint, per vertex ("latest" too)
//	GET   /jobs/:jobid/checkpoints/details/:cid/subtasks/:vertexid
//	GET   /jobs/:jobid/vertices/:vertexid         subtasks: state, host, times, metrics, watermarks
//	GET   /jobs/:jobid/vertices/:vertexid/metrics    ?get=0.numRecordsIn,...
//	GET   /jobs/:jobid/vertices/:vertexid/watermarks every subtask's input and output watermark
//	GET   /jobs/:jobid/vertices/:vertexid/backpressure
//	POST  /jobs/:jobid/savepoints                 {"target-directory", "cancel-job"}
//	POST  /jobs/:jobid/stop                       {"targetDirectory", "drain"}
//	GET   /jobs/:jobid/savepoints/:triggerid      the savepoint's status and location
//	GET   /jobs/:jobid/queryable-state            (Sluice) the names of the job's queryable states
//	GET   /jobs/:jobid/queryable-state/:name?key=k  (Sluice) k's current value, from the subtask owning it
//	GET   /jobs/:jobid/autoscaler                 (Sluice) the autoscaler's latest evaluation and decision
//	POST  /savepoint-disposal                     {"savepoint-path"}: delete a savepoint
//	GET   /savepoint-disposal/:triggerid          the disposal's status
//	GET   /jobs/:jobid/checkpoints/timeline       (Sluice) the checkpoints the server kept, for charts
//	GET   /config                                 the dashboard's settings
//	GET   /metrics                                Prometheus, when Options.Metrics is set
//	GET   /healthz, /readyz                       (Sluice) probes, no token: alive; every job and task RUNNING
//	GET   /openapi.json                           (Sluice) the OpenAPI 3 document of all of these, no token
//	GET   /                                       the dashboard
//
// :jobid is a job id, a unique prefix of one, or a job name.
//
// The server binds to 127.0.0.1:8081 (Flink's port) by default; set
// Options.Token to require "Authorization: Bearer <token>" on every API
// call and on /metrics (compared in constant time). The dashboard's
// static files need no token: the page asks for it (or takes it from the
// URL fragment #token=...) and sends it.
//
// Without a token the server keeps out web pages that the browser of
// someone on the host visits, though not whoever reaches its port (so
// listen on the loopback interface only, see LoopbackAddr): it answers
// only to the Host names localhost, IP addresses, the host of
// Options.Addr and Options.AllowedHosts (DNS rebinding), and a request
// that changes something (POST, PATCH, PUT, DELETE) is refused with 403
// when its Origin is not the server's own or its Sec-Fetch-Site is
// cross-site, and with 415 when it has a body or a content type that is
// not application/json. It sends no CORS headers. Every answer has
// X-Frame-Options: DENY, X-Content-Type-Options: nosniff, Referrer-Policy:
// no-referrer and a Content-Security-Policy (the dashboard's allows its
// own origin only and nothing inline). Options.CertFile and KeyFile serve
// HTTPS.
//
// A program that ends with its job closes the server with Shutdown, which
// first waits (bounded by its context) until the client that stopped the
// job with a savepoint has read where the savepoint is.
//
//	srv := api.New(api.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
//	srv.AddJob(job)
//	if err := srv.Start(); err != nil { ... }
//	defer srv.Close()
//
// A refused request is answered in Flink's shape, saying why:
//
//	{"errors": ["cross-origin request refused: Origin http://evil.example is not this server's (http://127.0.0.1:8081); ..."]}
package api
