#!/usr/bin/env bash
# The scale and passthrough benches on a lent machine (no Node, npm or Redis there).
#
# Here, once per build:   bash bench/device-run.sh --pack
#   builds dist/ and dist-bench/, packs Node, the production dependencies and redis-server into
#   .device/ (git-ignored) with the workplace's ../shared/tools/device-bundle.sh, and adds dist-bench/.
# There, with .device/ carried beside the checkout:   bash bench/device-run.sh PART...
#   unpacks under /opt/b, then runs each PART with its own time limit, its output in $OUT/PART.log.
#
# PARTs and their time on a 16-core machine (Node 20): s1k3k (1,000 and 3,000 streams on one
# process and 3 replicas, ≈ 160 s), s3k8 (3,000 on 8 replicas, ≈ 45 s), cl3k (3,000 on 3
# replicas over a 3-primary Cluster, ≈ 45 s), s10k (10,000 on 8 replicas, ≈ 50 s), pt (the
# passthrough, ≈ 95 s); unpacking ≈ 5 s. Each scale part measures 20 s after a 5 s warm-up.
set -u
if [ "${1:-}" = --pack ]; then
  set -e
  npm run prebench >/dev/null
  bash ../shared/tools/device-bundle.sh
  rm -rf .device/dist-bench && cp -r dist-bench .device/dist-bench
  exit 0
fi

B=${B:-/opt/b}
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT" "$B"
t0=$(date +%s)
if [ ! -x "$B/bin/node" ]; then
  tar xJf .device/bundle.tar.xz -C "$B"
  # Children spawned with a clean environment must find redis-server's libraries too.
  cp -n "$B"/lib/* /usr/lib/x86_64-linux-gnu/ 2>/dev/null
  ldconfig 2>/dev/null
fi
rm -rf "$B/app/dist-bench" && cp -r .device/dist-bench "$B/app/dist-bench"
export PATH=$B/bin:$PATH
# 10,000 streams hold 20,000 sockets and more; a hard limit of 20,000 still carries them.
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
cd "$B/app" || exit 1
{
  echo "unpacked in $(($(date +%s) - t0)) s"
  echo "cores $(nproc), node $(node --version), $(redis-server --version | cut -d' ' -f1-3), open files $(ulimit -n)"
} | tee "$OUT/machine.txt"

# part NAME LIMIT_S SECTION [VAR=value...]
part() {
  local name=$1 limit=$2 section=$3 start
  shift 3
  start=$(date +%s)
  echo "== $name (limit $limit s) at +$((start - t0)) s" | tee -a "$OUT/times.txt"
  env "$@" timeout -k 5 "$limit" node --expose-gc dist-bench/bench/main.js "$section" >"$OUT/$name.log" 2>&1
  echo "   rc=$? in $(($(date +%s) - start)) s" | tee -a "$OUT/times.txt"
  # A part cut at its limit may leave its children: none may load the next part (the lent
  # machine runs nothing else, so every redis-server there is the bench's).
  pkill -9 -f "$B/app/dist" 2>/dev/null
  pkill -9 -x redis-server 2>/dev/null
  sleep 1
  tail -n 30 "$OUT/$name.log"
}

for p in "$@"; do
  case $p in
    s1k3k) part scale-1k-3k 260 scale BENCH_SECONDS=20 BENCH_SCALE_STREAMS=1000,3000 BENCH_SCALE_REPLICAS=1,3 ;;
    s3k8) part scale-3k-8 120 scale BENCH_SECONDS=20 BENCH_SCALE_STREAMS=3000 BENCH_SCALE_REPLICAS=8 ;;
    cl3k) part cluster-3k 120 scale BENCH_SECONDS=20 BENCH_SCALE_STREAMS=3000 BENCH_SCALE_REPLICAS=3 BENCH_SCALE_STORE=cluster ;;
    s10k) part scale-10k 170 scale BENCH_SECONDS=20 BENCH_SCALE_STREAMS=10000 BENCH_SCALE_REPLICAS=8 ;;
    pt) part passthrough 170 passthrough ;;
    *) echo "unknown part $p (s1k3k, s3k8, cl3k, s10k, pt)" >&2 ;;
  esac
done
echo "total $(($(date +%s) - t0)) s" | tee -a "$OUT/times.txt"
