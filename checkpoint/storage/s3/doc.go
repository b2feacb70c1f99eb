// Package s3 owns checkpoint storage on S3 and S3-compatible object
// stores: storage.Backend on a bucket and key prefix (conditional PUT for
// the _metadata commit, multipart uploads for large state files, listing
// by prefix, batched deletes, retries with backoff), its configuration
// with Flink's option names (s3.endpoint, s3.path.style.access,
// s3.entropy.key, ...), and the opener that storage.Open uses for s3://,
// s3a:// and s3p:// locations once the package is imported.
//
// Credentials and region come from the standard AWS chain
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, profiles, roles)
// unless Config sets them; the endpoint from Config.Endpoint, else
// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL.
package s3
