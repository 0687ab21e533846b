#!/usr/bin/env bash
# Builds the CPU image (deploy/Dockerfile) here and runs it once: /health and the image's own
# HEALTHCHECK, /v1/models, a TTS request, an S2S task, a Realtime turn over the WebSocket, then
# SIGTERM during a second turn (it finishes, the socket closes with 1001) and a clean exit (0).
# Prints each step's time, the image's size and the result; exits non-zero on any failure.
#
#   scripts/image-check.sh            # as root, with podman and buildah (Debian: apt-get install
#                                     # podman buildah runc mmdebstrap podman-compose aardvark-dns);
#                                     # 27 min from nothing on 2 busy cores, 2 min with the
#                                     # images built (measured; README "Deploying", "Images")
#   scripts/image-check.sh bases      # only the base images
#   scripts/image-check.sh static     # only the checks without podman: the Kubernetes manifests
#                                     # against the schemas, the systemd unit (systemd-analyze)
#
# After the image: the systemd unit (systemd-analyze), the Kubernetes manifests (schemas, then
# `podman kube play`) and deploy/compose.yaml (podman-compose), each described at its function.
#
# No registry image is pulled: the two base images are made from Debian's packages with
# mmdebstrap and `podman import`ed (once; IMAGE_CHECK_REBUILD_BASES=1 makes them again):
#   localhost/lfm2-runtime-base:bookworm   minbase + ca-certificates, curl (for RUNTIME_IMAGE)
#   localhost/lfm2-builder-base:bookworm   minbase + gcc, g++ and this machine's Rust toolchain
#                                          (rustc/cargo of `rustup which cargo`) in
#                                          /usr/local/cargo, as in the rust image (BUILDER_IMAGE)
# The build is offline: this machine's cargo registry ($CARGO_HOME/registry, filled by
# `cargo fetch`) is mounted into the builder and the build has no network.
#
# The model: the product image has no demo package (feature `demo`), so the check first builds
# the same Dockerfile with SERVE_FEATURES=hub,demo (tag :cpu-demo; the cache mount on target/
# keeps ggml's objects), runs that once to write the demo package (random tiny weights) into a
# host directory, and then runs the product image with that directory as /models.
#
# Environment: IMAGE_CHECK_DIR (default target/image-check), IMAGE_CHECK_PORT (18080),
# IMAGE_CHECK_TAG (localhost/lfm2-audio-serve:cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=${IMAGE_CHECK_DIR:-$root/target/image-check}
port=${IMAGE_CHECK_PORT:-18080}
tag=${IMAGE_CHECK_TAG:-localhost/lfm2-audio-serve:cpu}
demo_tag=${tag}-demo
runtime_base=localhost/lfm2-runtime-base:bookworm
builder_base=localhost/lfm2-builder-base:bookworm
registry=${CARGO_HOME:-$HOME/.cargo}/registry
mkdir -p "$work"

say() { echo "image-check: $*"; }
fail() { echo "image-check: FAILED: $*" >&2; exit 1; }
# timed NAME CMD...: runs CMD and prints its wall time.
timed() {
  local name=$1 s
  shift
  s=$(date +%s)
  "$@"
  say "$name: $(( $(date +%s) - s )) s"
}

need_tools() {
  local tool
  for tool in podman mmdebstrap curl python3; do
    command -v "$tool" >/dev/null || fail "$tool not found (apt-get install podman buildah runc mmdebstrap curl python3)"
  done
  [ "$(id -u)" = 0 ] || fail "run as root (rootful podman; mmdebstrap's root mode)"
  [ -d "$registry/src" ] || fail "no cargo registry at $registry: run \`cargo fetch\` once"
}

# --- podman in this sandbox --------------------------------------------------------------------
# What a plain `podman run` needs here, found by trying (Debian bookworm's podman 4.3 in a VM
# without CAP_SYS_RESOURCE and with hybrid cgroups): podman's default RLIMIT_NPROC/NOFILE are
# above the hard limits (crun/runc: "setrlimit RLIMIT_NPROC: Operation not permitted"), and crun
# refuses hybrid cgroups ("cgroups in hybrid mode not supported"), runc takes them. On a normal
# host none of this is needed; the check tries without first.
podman_opts=()
probe() { podman run --rm "${podman_opts[@]}" "$1" true >/dev/null 2>&1; }

# --- base images from Debian's packages --------------------------------------------------------
# why the path excludes: what debian:bookworm-slim leaves out (documentation, man pages, locales).
# why the merged-usr hook: without it mmdebstrap installs the usrmerge package, and with it perl
# (45 MB). No recommends, as in the Dockerfile's apt-get.
slim=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --aptopt='APT::Install-Recommends "false"'
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
      --dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/doc/*'
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/info/*')

make_runtime_base() {
  nice -n 10 mmdebstrap --quiet --variant=minbase --include=ca-certificates,curl "${slim[@]}" \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm - 2>>"$work/mmdebstrap.log" \
    | podman import --change 'CMD ["/bin/bash"]' - "$runtime_base" >/dev/null
}

make_builder_base() {
  local toolchain
  toolchain=$(dirname "$(dirname "$(rustup which cargo)")")
  [ -x "$toolchain/bin/rustc" ] || fail "no Rust toolchain at $toolchain"
  say "builder toolchain: $("$toolchain/bin/rustc" --version) from $toolchain"
  # The toolchain's bin/cargo, bin/rustc and lib/ (rustc's libraries, the standard library,
  # the linker wrappers) into /usr/local/cargo, where the rust image has its cargo.
  nice -n 10 mmdebstrap --quiet --variant=minbase --include=ca-certificates,gcc,g++,libc6-dev "${slim[@]}" \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      --customize-hook="mkdir -p \"\$1/usr/local/cargo/bin\" && cp -a '$toolchain/bin/cargo' '$toolchain/bin/rustc' \"\$1/usr/local/cargo/bin/\" && cp -a '$toolchain/lib' \"\$1/usr/local/cargo/\"" \
      bookworm - 2>>"$work/mmdebstrap.log" \
    | podman import --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$builder_base" >/dev/null
}

bases() {
  for base in runtime builder; do
    local image=localhost/lfm2-$base-base:bookworm
    if [ "${IMAGE_CHECK_REBUILD_BASES:-0}" = 1 ] || ! podman image exists "$image"; then
      timed "base image $image (mmdebstrap)" "make_${base}_base"
    fi
    say "$image: $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec) "
  done
  if ! probe "$runtime_base"; then
    podman_opts=(--runtime runc --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
    probe "$runtime_base" || fail "podman cannot run a container here, not even with ${podman_opts[*]}"
    say "podman needs here: ${podman_opts[*]}"
  fi
}

# --- the images -------------------------------------------------------------------------------
# build TAG FEATURES: deploy/Dockerfile on the local bases, offline, GGML_SYS_CPU=portable.
build() {
  # why --format docker: OCI image configs have no HEALTHCHECK (podman drops it with a warning).
  # why --network none: nothing in the build may download (the registry is mounted in).
  nice -n 10 podman build "${podman_opts[@]}" --format docker --network none \
      --volume "$registry:/usr/local/cargo/registry" \
      --build-arg BUILDER_IMAGE="$builder_base" --build-arg RUNTIME_IMAGE="$runtime_base" \
      --build-arg GGML_SYS_CPU=portable --build-arg CARGO_NET_OFFLINE=true \
      --build-arg SERVE_FEATURES="$2" \
      -f deploy/Dockerfile -t "$1" . > "$work/build-${2//,/-}.log" 2>&1 \
    || { tail -40 "$work/build-${2//,/-}.log"; fail "podman build of $1 (log: $work/build-${2//,/-}.log)"; }
}

# run_checks: the product image on the demo package.
run_checks() {
  local name=lfm2-image-check cid s base=http://127.0.0.1:$port
  podman rm -f "$name" >/dev/null 2>&1 || true
  # why --network host: this sandbox's netavark has no usable port forwarding; with it the port
  # is the container's SERVE_PORT. Elsewhere `-p $port:8080` is the same.
  mkdir -p "$work/hf-cache" && chown 10001:10001 "$work/hf-cache"
  # why 2>>podman.log: without systemd (this sandbox) podman logs that it cannot make the
  # health check's timer; `podman healthcheck run` below runs the check itself.
  cid=$(podman run -d --name "$name" "${podman_opts[@]}" --network host \
      -e SERVE_PORT="$port" -e SERVE_MAX_TOKENS=64 -e SERVE_SLOTS=1 -e SERVE_THREADS=1 \
      -v "$package:/models:ro" -v "$work/hf-cache:/var/cache/huggingface" "$tag" 2>>"$work/podman.log")
  s=$(date +%s)
  until curl -fsS "$base/health" >/dev/null 2>&1; do
    [ "$(podman inspect --format '{{.State.Running}}' "$cid")" = true ] \
      || { podman logs "$cid" | tail -20; fail "the container exited before /health answered"; }
    [ $(( $(date +%s) - s )) -lt 120 ] || fail "/health did not answer in 120 s"
    sleep 0.5
  done
  say "up: /health answered $(( $(date +%s) - s )) s after start"
  [ "$(podman exec "$cid" id -u)" = 10001 ] || fail "serve does not run as uid 10001"
  podman healthcheck run "$cid" >/dev/null || fail "the image's HEALTHCHECK failed"
  say "HEALTHCHECK passes; serve runs as uid $(podman exec "$cid" id -un) ($(podman exec "$cid" id -u))"
  curl -fsS "$base/health/ready" | grep -q '"ready"' || fail "/health/ready is not ready"

  curl -fsS "$base/v1/models" > "$work/models.json"
  python3 - "$work/models.json" <<'PY' || fail "/v1/models: $(cat "$work/models.json")"
import json, sys
ids = sorted(m["id"] for m in json.load(open(sys.argv[1]))["data"])
assert ids == ["lfm2-audio-asr", "lfm2-audio-s2s", "lfm2-audio-tts"], ids
print("image-check: /v1/models:", ", ".join(ids))
PY

  # why this text, voice and seed: the demo package's random TTS often ends before it speaks;
  # this one speaks (serve/tests/openai.rs tries these in this order).
  curl -fsS "$base/v1/audio/speech" -H 'content-type: application/json' -o "$work/speech.wav" \
      -d '{"model":"lfm2-audio-tts","input":"Hello there, numbers 2024 and voices.","voice":"uk-female","seed":11}'

  # A 1 s 440 Hz question at 16 kHz for the S2S task.
  python3 - "$work/speech.wav" "$work/question.wav" <<'PY' || fail "TTS reply is not a 24 kHz WAV with audio"
import math, struct, sys, wave
w = wave.open(sys.argv[1])
assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2), w.getparams()
assert w.getnframes() > 0
print(f"image-check: TTS: {w.getnframes() / 24000:.2f} s of 24 kHz audio")
q = wave.open(sys.argv[2], "wb")
q.setnchannels(1); q.setsampwidth(2); q.setframerate(16000)
q.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / 16000))) for i in range(16000)))
PY

  printf '{"model":"lfm2-audio-s2s","request":{"audio":"%s","max_tokens":64}}' \
      "$(base64 -w0 "$work/question.wav")" > "$work/s2s-body.json"
  curl -fsS "$base/v1/tasks/run" -H 'content-type: application/json' -d @"$work/s2s-body.json" \
      -o "$work/s2s.json"
  python3 - "$work/s2s.json" <<'PY' || fail "S2S task: $(head -c 300 "$work/s2s.json")"
import base64, json, sys
r = json.load(open(sys.argv[1]))
audio = base64.b64decode(r["audio"])
assert audio[:4] == b"RIFF" and len(audio) > 44 and r["sample_rate"] == 24000, (len(audio), r.get("sample_rate"))
print(f"image-check: S2S task: {len(audio)} bytes of WAV, {r['lfm2_audio']['steps']} steps")
PY

  python3 deploy/check/realtime_turn.py 127.0.0.1 "$port" lfm2-audio-s2s 24 > "$work/realtime.json" \
    || fail "Realtime turn: $(cat "$work/realtime.json")"
  say "Realtime turn: $(cat "$work/realtime.json")"

  # SIGTERM with a Realtime turn running: serve drains, the turn ends as it would have
  # (completed or at its step limit, not cancelled), the socket is closed with 1001, exit 0.
  local drain=$work/drain-started client
  rm -f "$drain"
  python3 deploy/check/realtime_turn.py 127.0.0.1 "$port" lfm2-audio-s2s 64 "$drain" \
      > "$work/drain.json" &
  client=$!
  s=$(date +%s)
  until [ -e "$drain" ]; do
    kill -0 "$client" 2>/dev/null || fail "drain: the turn ended before its first audio: $(cat "$work/drain.json")"
    [ $(( $(date +%s) - s )) -lt 60 ] || fail "drain: no audio delta in 60 s"
    sleep 0.05
  done
  s=$(date +%s)
  podman kill --signal TERM "$cid" >/dev/null
  wait "$client" || fail "drain: the running turn: $(cat "$work/drain.json")"
  say "SIGTERM mid-turn: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("turn", r["status"], r["usage"]["output_tokens"], "steps,", r["audio_bytes"], "bytes of audio; socket closed", r["close_code"], repr(r["close_reason"]))' "$work/drain.json")"
  local code
  code=$(timeout 30 podman wait "$cid") || fail "serve did not exit within 30 s of SIGTERM"
  podman logs "$cid" > "$work/serve.log" 2>&1
  [ "$code" = 0 ] || { tail -20 "$work/serve.log"; fail "serve exited with code $code after SIGTERM"; }
  say "SIGTERM: exited with code 0 after $(( $(date +%s) - s )) s"
  podman rm "$cid" >/dev/null 2>>"$work/podman.log"
}

# demo_package: runs the :cpu-demo image once without a model (it writes the demo package to
# $TMPDIR, here a host directory) and stops it; sets $package to the package directory.
demo_package() {
  local dir=$work/demo s cid
  rm -rf "$dir" && mkdir -p "$dir" && chown 10001:10001 "$dir"
  cid=$(podman run -d "${podman_opts[@]}" --no-healthcheck --network host -e TMPDIR=/demo -e SERVE_PORT="$port" \
      -v "$dir:/demo" "$demo_tag" --port "$port")
  s=$(date +%s)
  until curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
    [ "$(podman inspect --format '{{.State.Running}}' "$cid")" = true ] \
      || { podman logs "$cid" | tail -20; fail "the demo container exited"; }
    [ $(( $(date +%s) - s )) -lt 300 ] || fail "the demo container did not answer in 300 s"
    sleep 0.5
  done
  podman stop -t 30 "$cid" >/dev/null && podman rm "$cid" >/dev/null
  package=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'lfm2-audio-demo-*' | head -1)
  [ -n "$package" ] || fail "no demo package written in $dir"
  say "demo package: $package ($(du -sh "$package" | cut -f1))"
}

# use_podman_opts_conf: podman_opts as a containers.conf, for the commands that take no
# --runtime/--ulimit (kube play, podman-compose's runs).
use_podman_opts_conf() {
  [ ${#podman_opts[@]} -gt 0 ] || return 0
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
    "$(ulimit -Hn)" "$(ulimit -Hn)" > "$work/containers.conf"
  export CONTAINERS_CONF=$work/containers.conf
}

# --- the systemd unit ---------------------------------------------------------------------------
# unit_verify: deploy/lfm2-audio-serve.service through `systemd-analyze verify` and the offline
# security review (its exposure score). verify checks that ExecStart and EnvironmentFile exist:
# a copy points them at /bin/true and deploy/serve.env. Nothing here runs it (no systemd PID 1).
unit_verify() {
  command -v systemd-analyze >/dev/null || fail "systemd-analyze not found (apt-get install systemd)"
  local dir=$work/unit
  mkdir -p "$dir"
  sed -e 's#^ExecStart=.*#ExecStart=/bin/true#' -e "s#^EnvironmentFile=.*#EnvironmentFile=$root/deploy/serve.env#" \
      deploy/lfm2-audio-serve.service > "$dir/lfm2-audio-serve.service"
  systemd-analyze verify "$dir/lfm2-audio-serve.service" || fail "systemd-analyze verify"
  local exposure
  exposure=$(systemd-analyze security --offline=true "$dir/lfm2-audio-serve.service" 2>/dev/null \
      | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p')
  [ -n "$exposure" ] || fail "systemd-analyze security gave no exposure level"
  say "systemd unit: systemd-analyze verify clean; security exposure $exposure"
}

# --- Kubernetes manifests ----------------------------------------------------------------------
# k8s_validate: deploy/k8s/*.yaml against the Kubernetes JSON schemas, strictly (an unknown field
# fails), offline: PyPI's kubernetes-validate ships the schemas of each release (installed once
# into a venv under $work; from then on no network).
k8s_validate() {
  local venv=$work/k8s-venv
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q kubernetes-validate \
      || fail "installing kubernetes-validate from PyPI"
  fi
  local version
  for version in 1.30.0 1.37.0; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" deploy/k8s/*.yaml \
      || fail "deploy/k8s does not validate against Kubernetes $version"
  done
  say "deploy/k8s/*.yaml: valid (strict) against Kubernetes 1.30.0 and 1.37.0 ($("$venv/bin/kubernetes-validate" --version))"
}

# kube_play: the PVC, ConfigMap and Deployment under `podman kube play`, on the product image
# and the demo package. What is changed for Podman (4.3 here): the image (the local tag), one
# replica (Podman publishes each containerPort on the host, so a second pod's port is taken),
# no ports block (the pod is reached at its own address instead) and SERVE_THREADS=1. The
# Service, Ingress and PodDisruptionBudget are not Podman's (the schema check covers them).
kube_play() {
  local yaml=$work/kube-play.yaml pod=lfm2-audio-serve-pod-0 ip s mount
  use_podman_opts_conf
  podman kube down "$yaml" >/dev/null 2>&1 || true
  podman volume rm -f lfm2-audio-models >/dev/null 2>&1 || true
  podman kube play deploy/k8s/pvc.yaml >/dev/null || fail "podman kube play deploy/k8s/pvc.yaml"
  mount=$(podman volume inspect --format '{{.Mountpoint}}' lfm2-audio-models)
  cp -a "$package/." "$mount/"
  { cat deploy/k8s/configmap.yaml; echo ---; sed -n '1,/^---$/p' deploy/k8s/deployment.yaml | sed '$d'; } \
    | sed -e "s#registry.example.com/lfm2-audio-serve:cpu#$tag#" -e 's#replicas: 2#replicas: 1#' \
          -e 's#SERVE_THREADS: "4"#SERVE_THREADS: "1"#' \
          -e '/^          ports:$/,/containerPort: 8080$/d' > "$yaml"
  podman kube play "$yaml" > "$work/kube-play.log" 2>&1 || { cat "$work/kube-play.log"; fail "podman kube play"; }
  ip=$(podman inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' \
      "$(podman pod inspect --format '{{.InfraContainerID}}' "$pod")")
  s=$(date +%s)
  until curl -fsS "http://$ip:8080/health/ready" >/dev/null 2>&1; do
    [ $(( $(date +%s) - s )) -lt 120 ] || { podman logs "$pod-serve" | tail; fail "the kube pod is not ready in 120 s"; }
    sleep 0.5
  done
  say "kube play: pod $pod ready at $ip:8080 after $(( $(date +%s) - s )) s; as $(podman inspect --format 'user {{.Config.User}}, read-only root {{.HostConfig.ReadonlyRootfs}}, health check {{.Config.Healthcheck.Test}}' "$pod-serve")"
  podman healthcheck run "$pod-serve" >/dev/null 2>>"$work/podman.log" || fail "the pod's livenessProbe (its health check) fails"
  python3 deploy/check/realtime_turn.py "$ip" 8080 lfm2-audio-s2s 8 > "$work/kube-realtime.json" \
    || fail "kube play: Realtime turn: $(cat "$work/kube-realtime.json")"
  say "kube play: Realtime turn: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["audio_bytes"], "bytes of audio")' "$work/kube-realtime.json")"
  podman pod stop -t 30 "$pod" >/dev/null 2>>"$work/podman.log"
  [ "$(podman inspect --format '{{.State.ExitCode}}' "$pod-serve")" = 0 ] || fail "kube play: serve's exit code after SIGTERM is not 0"
  say "kube play: pod stopped (SIGTERM), serve exited 0"
  podman kube down "$yaml" >/dev/null 2>>"$work/podman.log"
  podman volume rm -f lfm2-audio-models >/dev/null
  unset CONTAINERS_CONF
}

# --- compose: two replicas behind nginx ---------------------------------------------------------
# compose_check: deploy/compose.yaml under podman-compose on the product image (the demo package
# as MODEL_DIR) and an nginx image made from Debian's package. Checks: each conversation id's
# requests reach one replica (read from the replicas' logs by X-Request-Id), 8 ids use both, a
# Realtime turn passes through nginx's WebSocket upgrade, and SIGTERM to the replica holding a
# conversation: it exits 0 and that conversation's next requests are answered by the other one.
compose_check() {
  local nginx_image=localhost/lfm2-nginx:bookworm project=lfm2check front=$(( port + 10 )) i c r
  command -v podman-compose >/dev/null || fail "podman-compose not found (apt-get install podman-compose aardvark-dns)"
  if [ "${IMAGE_CHECK_REBUILD_BASES:-0}" = 1 ] || ! podman image exists "$nginx_image"; then
    nice -n 10 mmdebstrap --quiet --variant=minbase --include=nginx,curl "${slim[@]}" \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' bookworm - \
        2>>"$work/mmdebstrap.log" | podman import - "$nginx_image" >/dev/null
  fi
  use_podman_opts_conf
  # podman-compose runs from deploy/ (the compose file's relative paths); the short image name
  # lfm2-audio-serve:cpu finds the local tag.
  compose() {
    (cd deploy && MODEL_DIR=$package SERVE_THREADS=1 FRONT_PORT=$front NGINX_IMAGE=$nginx_image \
        podman-compose -p "$project" -f compose.yaml "$@") >> "$work/compose.log" 2>&1
  }
  [ "$tag" = localhost/lfm2-audio-serve:cpu ] || fail "compose.yaml names lfm2-audio-serve:cpu, not $tag"
  compose down || true
  compose up -d --no-build || { tail -20 "$work/compose.log"; fail "podman-compose up"; }
  local f=http://127.0.0.1:$front s
  s=$(date +%s)
  for r in 1 2; do
    until podman exec "${project}_serve-${r}_1" curl -fsS http://127.0.0.1:8080/health/ready >/dev/null 2>&1; do
      [ $(( $(date +%s) - s )) -lt 120 ] || { compose down; fail "replica serve-$r not ready in 120 s"; }
      sleep 0.5
    done
  done
  until curl -fsS "$f/nginx-health" >/dev/null 2>&1; do
    [ $(( $(date +%s) - s )) -lt 120 ] || { compose down; fail "nginx not up in 120 s"; }
    sleep 0.5
  done
  for c in serve-1 serve-2 nginx; do
    podman healthcheck run "${project}_${c}_1" >/dev/null 2>>"$work/podman.log" \
      || { compose down; fail "compose: the health check of $c fails"; }
  done
  say "compose: the health checks of serve-1, serve-2 (/health/ready) and nginx pass"
  for c in 0 1 2 3 4 5 6 7; do
    for i in 1 2 3; do
      curl -fsS -o /dev/null -H "X-Conversation-Id: conv-$c" -H "X-Request-Id: conv-$c-$i" "$f/v1/models" \
        || { compose down; fail "a request through nginx"; }
    done
  done
  # replica_of ID: which replica logged the requests conv-ID-* (1, 2, or "1 2" when split).
  replica_of() {
    local r n out=()
    for r in 1 2; do
      # why grep -c, not -q: -q stops reading, and pipefail then fails on podman's SIGPIPE.
      n=$(podman logs "${project}_serve-${r}_1" 2>&1 | grep -c "\"request_id\":\"$1-" || true)
      if [ "$n" -gt 0 ]; then out+=("$r"); fi
    done
    echo "${out[*]}"
  }
  local placed=() first
  for c in 0 1 2 3 4 5 6 7; do
    r=$(replica_of "conv-$c")
    [ "$r" = 1 ] || [ "$r" = 2 ] || { compose down; fail "conv-$c's requests went to replica(s) '$r'"; }
    placed+=("$r")
  done
  case " ${placed[*]} " in *" 1 "*) ;; *) compose down; fail "no conversation on replica 1";; esac
  case " ${placed[*]} " in *" 2 "*) ;; *) compose down; fail "no conversation on replica 2";; esac
  say "compose: 8 conversations x 3 requests through nginx, each on one replica (${placed[*]})"
  python3 deploy/check/realtime_turn.py 127.0.0.1 "$front" lfm2-audio-s2s 8 > "$work/compose-realtime.json" \
    || { compose down; fail "compose: Realtime turn through nginx: $(cat "$work/compose-realtime.json")"; }
  say "compose: Realtime turn through nginx: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["audio_bytes"], "bytes of audio")' "$work/compose-realtime.json")"
  first=${placed[0]}
  podman stop -t 20 "${project}_serve-${first}_1" >/dev/null 2>>"$work/podman.log"
  [ "$(podman inspect --format '{{.State.ExitCode}}' "${project}_serve-${first}_1")" = 0 ] \
    || { compose down; fail "replica serve-$first did not exit 0 on SIGTERM"; }
  for i in 4 5 6; do
    curl -fsS -o /dev/null -H "X-Conversation-Id: conv-0" -H "X-Request-Id: conv-0-after-$i" "$f/v1/models" \
      || { compose down; fail "conv-0 after its replica stopped"; }
  done
  r=$(replica_of conv-0-after)
  [ "$r" = $(( 3 - first )) ] || { compose down; fail "conv-0 went to '$r' after serve-$first stopped"; }
  say "compose: serve-$first stopped by SIGTERM (exit 0); conv-0 goes on on serve-$r"
  compose down
  unset CONTAINERS_CONF
}

# why a function: bash reads a script as it runs it, so an edit to this file during a run (the
# build takes minutes) would otherwise run shifted lines; a function is read whole first.
main() {
  # static: the checks that need no podman and no root (a venv from PyPI once, systemd-analyze).
  if [ "${1:-}" = static ]; then
    k8s_validate
    unit_verify
    return 0
  fi
  need_tools
  bases
  [ "${1:-}" = bases ] && return 0
  timed "build $tag (SERVE_FEATURES=hub)" build "$tag" hub
  say "$tag: $(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=iec) ($(podman image inspect --format '{{.Size}}' "$tag") bytes)"
  timed "build $demo_tag (SERVE_FEATURES=hub,demo)" build "$demo_tag" hub,demo
  timed "demo package" demo_package
  timed "run checks" run_checks
  timed "systemd unit check" unit_verify
  timed "k8s schema check" k8s_validate
  timed "k8s kube play" kube_play
  timed "compose" compose_check
  say "PASSED"
}

main "$@"; exit
