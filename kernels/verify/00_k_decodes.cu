// 00 k decodes: the baseline, attention/04's split-KV decode launched once a draft token
//
// Idea: before a verify kernel exists, k draft tokens are checked by running the single-token
// decode k times. Each launch is attention/04 unchanged (this file includes it, so its figures go
// stale when 04 changes): one query token a head, 32 query heads over 8 KV heads, every K and V
// row of the context read once a launch. The k launches read the cache k times; nothing is shared
// between them but whatever of the 134 MB cache the 50 MB L2 still holds from the launch before.
//
// Expected bound (estimate), B = 1, 32/8 heads, D = 128, T = 32768: k x 04's time, about
// k x 37 us (k x 134 MB at the ~4.29 TB/s copy ceiling is k x 31.3 us), so ~150 us at k = 4 and
// ~300 us at k = 8, against one pass over 134 MB for a verify kernel.
//
// Size constraints: those of 04 (D = 128, 4 query heads a KV head, T a multiple of 64); the
// launcher gives draft token i the query block q[i] and output block out[i] ([k, B, Hq, D]).

#include "../attention/04_split_kv.cu"
