// 03 cluster-scope release: 02 with one qualifier added to the consumer's stage release
//
// Idea against 02: the same kernel (this file compiles 02's source), except that a consumer
// warp frees a stage with `mbarrier.arrive.release.cluster.shared::cluster` instead of 02's
// plain `mbarrier.arrive.shared::cluster`, whose default semantics are `.release` at CTA scope. A
// release at cluster scope orders every earlier memory access of the arriving thread before the
// arrival, as seen from any CTA of the cluster; the peer CTA needs no such ordering here (it
// reads only what TMA wrote, and the barrier's phase already orders that). This version is a
// deliberate loss, kept to measure what the stronger ordering costs when it is paid once a
// k-step by every consumer warp, on two barriers.
//
// Expected bound (estimate): the first draft of 02 carried this qualifier, predicted to cost
// nothing (one arrival a warp a k-step); a side-by-side timing found it far slower, with or
// without a peer CTA. The mechanism estimated since: if the release drains like a fence at
// cluster scope (hundreds of cycles), it adds that to every k-step of ~1,024 tensor-core
// cycles, and with only one wgmma group in flight the tensor cores wait for it: a loss of tens
// of percent at every shape. If it waited only for the warp's own outstanding accesses (none in
// the main loop), 03 would run level with 02.
//
// Resources (nvcc 13.0, -arch=sm_90a --resource-usage): as 02, 168 registers at compile time,
// no spills; 230,464 bytes of dynamic shared memory.
//
// Constraints: as 02.

#define GH_RELEASE_SEMANTICS ".release.cluster"
#include "02_cluster_multicast.cu"
