// Package cluster runs one job on several processes: a coordinator (in
// Flink's role of the JobMaster) that runs the job's life and its
// checkpoint coordinator, and workers (TaskManagers) that offer slots and
// run the tasks placed on them. It joins the pieces that exist elsewhere:
// the runtime's Executor and TaskRunner, the control plane
// (cluster/control, TCP), the data plane (runtime/network's TCP
// transport), HA (cluster/ha; on etcd with cluster/ha/etcd, which a
// program imports to use it) and checkpoint storage shared by every
// process (a shared file system, or S3 with checkpoint/storage/s3). It
// links no gRPC, etcd client or AWS SDK itself. Slot sharing places subtask i of every vertex in slot i;
// a lost worker restarts the whole job from its latest checkpoint on the
// slots there are, a task's failure its failover region only, on the
// workers running it, where the job has several (a forward-only
// pipeline; runtime.RegionRestarter), else the whole job too.
package cluster
