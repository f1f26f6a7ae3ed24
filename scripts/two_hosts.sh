#!/usr/bin/env bash
# A two-host data-parallel run on one machine: two network namespaces ("hosts") joined by a veth
# pair, mpirun over TCP between them, and a launcher that enters a namespace where mpirun would
# ssh to a host. `heed train` on the two hosts must give the bits of one process with the same
# --grad-accum: the same losses and evaluations, the same model.safetensors.
#
#   scripts/two_hosts.sh [BUILD_DIR] [--rate 1gbit] [heed train flags...]
#   scripts/two_hosts.sh [BUILD_DIR] [--rate 1gbit] --run PROGRAM [ARGS...]
#
# BUILD_DIR (default build) holds heed and libheed_dist_mpi.so. --rate limits the link (tc's
# token bucket) to measure a slower network. --run runs any program on the two hosts instead
# (e.g. build/heed bench ..., build/heed_bench_allreduce), no check.
# Needs root (ip netns), iproute2 and Open MPI. Exit 0 when the two-host run matches.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [[ $# -gt 0 && $1 != --* ]]; then build=$1; shift; fi
rate=""
if [[ ${1:-} == --rate ]]; then rate=$2; shift 2; fi
run=()
if [[ ${1:-} == --run ]]; then shift; run=("$(realpath "$1")" "${@:2}"); set --; fi
flags=("$@")
[[ ${#flags[@]} -gt 0 ]] || flags=(--grad-accum 2 --max-iters 6 --eval-interval 3 --eval-iters 2 --n-layer 2
  --n-head 2 --n-embd 32 --block-size 32 --batch-size 4 --dropout 0.1 --log-interval 1 --sample-tokens 0)
heed=$(realpath "$build/heed")
[[ -x $heed ]] || { echo "two_hosts.sh: $heed not built (cmake --build $build --target heed_cli)" >&2; exit 2; }

ns_a=heed-host-a ns_b=heed-host-b ip_a=10.77.0.1 ip_b=10.77.0.2
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
remove_namespaces() {  # deleting a namespace deletes its end of the veth pair, and so the pair
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
}
remove_namespaces  # left by an interrupted run
work=$(mktemp -d)
trap 'remove_namespaces; rm -rf "$work"' EXIT

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add veth-heed-a type veth peer name veth-heed-b
ip link set veth-heed-a netns "$ns_a"
ip link set veth-heed-b netns "$ns_b"
ip -n "$ns_a" addr add "$ip_a/24" dev veth-heed-a
ip -n "$ns_b" addr add "$ip_b/24" dev veth-heed-b
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set veth-heed-a up
ip -n "$ns_b" link set veth-heed-b up
if [[ -n $rate ]]; then  # both directions
  ip netns exec "$ns_a" tc qdisc add dev veth-heed-a root tbf rate "$rate" burst 1mb latency 50ms
  ip netns exec "$ns_b" tc qdisc add dev veth-heed-b root tbf rate "$rate" burst 1mb latency 50ms
fi

# The launcher mpirun runs instead of ssh: `launcher HOST COMMAND...` runs COMMAND in HOST's
# namespace (Open MPI's rsh launcher passes the remote command as one shell string).
cat > "$work/launcher" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $ip_a) ns=$ns_a ;;
  $ip_b) ns=$ns_b ;;
  *) echo "launcher: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c "\$*"
EOF
chmod +x "$work/launcher"
printf '%s slots=1\n%s slots=1\n' "$ip_a" "$ip_b" > "$work/hosts"
# btl tcp,self: no shared memory between the "hosts"; oob and btl on the veth only.
on_two_hosts() {
  ip netns exec "$ns_a" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 600 mpirun --hostfile "$work/hosts" -np 2 --map-by node \
    --mca plm_rsh_agent "$work/launcher" --mca btl tcp,self \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    -x OPENBLAS_NUM_THREADS "$@"
}
if [[ ${#run[@]} -gt 0 ]]; then
  on_two_hosts "${run[@]}"
  exit
fi

# --threads 1 on both sides: the bits of a micro-batch's gradient must not depend on where it ran.
echo "== one process: heed train ${flags[*]}"
"$heed" train "${flags[@]}" --threads 1 --out "$work/one" | tee "$work/one.txt"
echo "== two hosts over TCP ($ip_a, $ip_b${rate:+, $rate})"
start=$(date +%s%N)
on_two_hosts "$heed" train "${flags[@]}" --threads 1 --out "$work/two" | tee "$work/two.txt"
echo "== mpirun took $(( ($(date +%s%N) - start) / 1000000 )) ms"

# The losses and evaluations printed, and the log, without the speed and time columns.
results() { grep -E '^(iter|eval) ' "$1.txt" | sed 's/, [0-9]* tok\/s.*//'; sed -E 's/"elapsed_s":[0-9.e+-]*,?//; s/,?"tok_s":[0-9.e+-]*//' "$1/log.jsonl"; }
results "$work/one" > "$work/one.res"
results "$work/two" > "$work/two.res"
grep -q 'tokens per iteration on 2 processes' "$work/two.txt" || { echo "two_hosts.sh: the job did not run on 2 processes" >&2; exit 1; }
if cmp -s "$work/one.res" "$work/two.res" && cmp -s "$work/one/model.safetensors" "$work/two/model.safetensors"; then
  echo "two_hosts.sh: OK, heed train on two hosts has the bits of one process (losses, evaluations, model.safetensors)"
else
  echo "two_hosts.sh: MISMATCH between one process and two hosts" >&2
  diff "$work/one.res" "$work/two.res" >&2 || true
  exit 1
fi
