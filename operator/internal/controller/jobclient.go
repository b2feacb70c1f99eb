package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// The operator's calls to a job's REST API go to its leading coordinator:
//
//   - without HA, the coordinator Service (one coordinator);
//   - under HA (spec.ha), the coordinator pod that does not stand by: the
//     operator asks each running coordinator pod's /readyz (no token),
//     where a standby answers "standby"; the Service would pick a standby
//     as readily as the leader, since both are ready;
//   - over HTTPS when spec.security.tlsSecretName is set (the coordinator
//     serves its API with the Secret's tls.crt), verified against the
//     Secret's ca.crt for the Service's DNS name
//     <job>-coordinator.<namespace>.svc, whatever address is dialled: the
//     certificate must name it;
//   - with the bearer token of spec.security.restToken.

// readyzTimeout bounds one pod's /readyz while the leader is looked for.
const readyzTimeout = 2 * time.Second

// api is the client of the job's REST API: its leader's, with TLS and
// the token. Under HA it records the leader pod in status.job.coordinator.
func (r *Reconciler) api(ctx context.Context, job *sluicev1.SluiceJob) (*jobapi.Client, error) {
	spec := job.Status.Deployed
	if spec == nil {
		spec = &job.Spec
	}
	c := &jobapi.Client{}
	scheme := "http"
	if sec := spec.Security.TLSSecretName; sec != "" {
		hc, err := r.tlsClient(ctx, job, sec)
		if err != nil {
			return nil, err
		}
		c.HTTP, scheme = hc, "https"
	}
	if ref := spec.Security.RESTToken; ref != nil {
		tok, err := r.secretKey(ctx, job.Namespace, ref.Name, ref.Key, "spec.security.restToken")
		if err != nil {
			return nil, err
		}
		c.Token = string(tok)
	}
	addr := net.JoinHostPort(CoordinatorService(job), strconv.Itoa(PortREST))
	if r.ServiceAddress != nil {
		addr = r.ServiceAddress(addr)
	}
	c.Base = scheme + "://" + addr
	if spec.HA != nil {
		pod, base, err := r.leader(ctx, job, c, scheme)
		if err != nil {
			return nil, err
		}
		if base != "" {
			c.Base = base
			job.Status.Job.Coordinator = pod
		}
	}
	return c, nil
}

// leader finds the coordinator pod that leads the job: the first running
// one, by name, whose /readyz answers and is not "standby". "" when none
// does (an election under way): the caller uses the Service.
func (r *Reconciler) leader(ctx context.Context, job *sluicev1.SluiceJob, c *jobapi.Client, scheme string) (pod, base string, err error) {
	var pods corev1.PodList
	if err := r.reader().List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels(selector(job, ComponentCoordinator))); err != nil {
		return "", "", fmt.Errorf("list the coordinator pods of %s/%s: %w", job.Namespace, job.Name, err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		try := *c
		try.Base = scheme + "://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(PortREST))
		pctx, cancel := context.WithTimeout(ctx, readyzTimeout)
		rd, err := try.Ready(pctx)
		cancel()
		if err != nil || rd.Standby() {
			continue
		}
		return p.Name, try.Base, nil
	}
	return "", "", nil
}

// secretKey reads one key of a Secret of the job's namespace; field names
// the spec's field that refers to it, for the error.
func (r *Reconciler) secretKey(ctx context.Context, ns, name, key, field string) ([]byte, error) {
	var s corev1.Secret
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("read Secret %s/%s (%s): %w", ns, name, field, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("Secret %s/%s has no key %q (%s)", ns, name, key, field)
	}
	return v, nil
}

// tlsClients are the HTTP clients of the jobs served over TLS, by CA and
// server name: one transport each, its connections reused.
var tlsClients sync.Map // string -> *http.Client

// tlsClient is an HTTPS client trusting the CA of the job's TLS Secret
// (ca.crt) for the coordinator Service's name.
func (r *Reconciler) tlsClient(ctx context.Context, job *sluicev1.SluiceJob, secret string) (*http.Client, error) {
	ca, err := r.secretKey(ctx, job.Namespace, secret, "ca.crt", "spec.security.tlsSecretName")
	if err != nil {
		return nil, err
	}
	name := CoordinatorService(job)
	key := name + "\x00" + string(ca)
	if hc, ok := tlsClients.Load(key); ok {
		return hc.(*http.Client), nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("Secret %s/%s: ca.crt holds no PEM certificate (spec.security.tlsSecretName)", job.Namespace, secret)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	hc, _ := tlsClients.LoadOrStore(key, &http.Client{Timeout: 10 * time.Second, Transport: tr})
	return hc.(*http.Client), nil
}
