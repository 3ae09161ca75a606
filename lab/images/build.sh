#!/usr/bin/env bash
# Builds the lab's container images without a registry or a container builder, as OCI image layout tars that
# `ctr -n k8s.io images import` takes, into lab/images/out/<name>.tar (git-ignored):
#
#   manager         docker.io/library/rethinkdb-k8s-manager:<chart appVersion>  /Dockerfile's runtime stage
#   rethinkdb       docker.io/library/rethinkdb-k8s-rethinkdb:2.4.4-bookworm-slim  docker/rethinkdb/Dockerfile
#   pause           rkl.local/pause:1                 the pod sandbox, lab/images/pause.c built static
#   coredns         rkl.local/coredns:<go.mod>        lab/kube/bin/coredns alone (skipped until that exists)
#   metrics-server  rkl.local/metrics-server:<go.mod> lab/kube/bin/metrics-server alone (idem)
#
# The runtime configs (user, workdir, env, ports, command, labels) are in images.js, checked against the Dockerfiles
# by test/unit/lab-images.test.js. The manager and RethinkDB share one base layer: Debian bookworm minbase made by
# mmdebstrap from this machine's Debian mirror (read from /etc/apt/sources.list{,.d}) plus the libraries node and
# rethinkdb link against and curl. On it: Node.js 20 from this machine's nodejs package (as the Dockerfile's
# node:20-bookworm-slim, which Debian's nodejs 18 is not), the `npm run build` bundle, or the rethinkdb server binary
# ($RETHINKDB_BINARY, else ../shared/rethinkdb/rethinkdb next to the repository).
#
# Layers are uncompressed tars made reproducibly (GNU tar: names sorted, mtime 0, numeric owners, no atime/ctime), so
# the same files give the same digest. Idempotent: each root file system, layer and image tar is kept under out/cache/
# with a stamp of its inputs' content and rebuilt only when that changes. Needs root (mmdebstrap's root mode, file
# owners 1000, setcap).
#
#   sudo bash lab/images/build.sh [--force] [IMAGE...]     (npm run lab:images)
#   ctr -n k8s.io images import lab/images/out/manager.tar
set -euo pipefail
umask 022
export LC_ALL=C

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="$HERE/out"
CACHE="$OUT/cache"
# Part of every stamp: bump it to rebuild everything after a change this script's functions do not show.
RECIPE=1
T0="$(date +%s.%N)"
FORCE=0
SELECTED=()
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) SELECTED+=("$arg") ;;
  esac
done

elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%6.1f", b - a }'; }
log() { printf '[images %ss] %s\n' "$(elapsed)" "$*"; }
die() { printf '[images %ss] ERROR: %s\n' "$(elapsed)" "$*" >&2; exit 1; }
# Runs "$@" and logs its duration: timed LABEL COMMAND...
timed() {
  local label="$1" t
  shift
  t="$(date +%s.%N)"
  "$@"
  log "$label: done in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
}

[ "$(id -u)" = 0 ] || die "run as root: mmdebstrap's root mode, file owners 1000:1000 and setcap need it (sudo bash $0)"
for tool in mmdebstrap tar gcc node sha256sum setcap flock dpkg; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
mkdir -p "$CACHE"
exec 9>"$OUT/.lock"
flock -n 9 || die "another build.sh is running (lock $OUT/.lock)"
if [ "$FORCE" = 1 ]; then
  log "--force: forgetting every stamp"
  rm -f "$CACHE"/*.stamp "$OUT"/*.stamp
fi

# --- Stamps: an artifact is reused when it exists and its .stamp holds the hash of the inputs it was made from. ---

hash_stdin() { sha256sum | cut -c1-64; }
# Names, types, modes, owners, link targets and contents of files and trees.
hash_paths() {
  {
    find "$@" -printf '%p %y %m %U:%G %l\n' | sort
    find "$@" -type f -print0 | sort -z | xargs -0 -r sha256sum
  } | hash_stdin
}
# The same for a list of paths on stdin, each taken alone (a directory's mode, not its content).
hash_list() {
  local paths
  mapfile -t paths
  {
    find "${paths[@]}" -maxdepth 0 -printf '%p %y %m %U:%G %l\n'
    find "${paths[@]}" -maxdepth 0 -type f -print0 | xargs -0 -r sha256sum
  } | hash_stdin
}
fresh() { [ -e "$1" ] && [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$2" ]; }
mark() { printf '%s\n' "$2" >"$1.stamp"; }

# A reproducible layer tar of a directory's content (not the directory itself): make_layer DIR OUT.tar.
# Writes OUT.tar.sha256 beside it (oci-tar.js reads it rather than hashing the tar again).
make_layer() {
  local dir="$1" out="$2" entries
  mapfile -t entries < <(cd "$dir" && ls -A)
  [ "${#entries[@]}" -gt 0 ] || die "empty layer $dir"
  tar -C "$dir" --create --file "$out.tmp" --format=posix --sort=name --mtime=@0 --numeric-owner \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --xattrs --xattrs-include=security.capability --no-acls --no-selinux -- "${entries[@]}"
  mv "$out.tmp" "$out"
  printf 'sha256:%s\n' "$(sha256sum "$out" | cut -c1-64)" >"$out.sha256"
}
layer_digest() { cat "$1.sha256"; }
human() { numfmt --to=iec --suffix=B "$1" 2>/dev/null || echo "$1 B"; }

# --- Layers. Each layer_X sets LAYER to its tar, building it when its stamp is stale. ---

declare -A LAYER_DONE=()
LAYER=""
BASE="$CACHE/base.rootfs"

build_base_rootfs() {
  local packages="$1" log_file="$CACHE/base.mmdebstrap.log"
  shift
  rm -rf "$BASE" "$BASE.tmp"
  # The slim images' dpkg exclusions (docs but their copyright, man pages, locales); they stay in the image's dpkg
  # configuration as in debian:bookworm-slim. /usr merged by directory symlinks as debootstrap (and so Debian's
  # images) do: without the hook, apt satisfies init-system-helpers with the usrmerge package, which pulls in perl
  # (+50 MB). SOURCE_DATE_EPOCH=0: the same packages give the same files.
  local hooks=/usr/share/mmdebstrap/hooks/merged-usr
  [ -d "$hooks" ] || die "no $hooks (mmdebstrap's merged-/usr hook)"
  if ! SOURCE_DATE_EPOCH=0 mmdebstrap --mode=root --variant=minbase --include="$packages" --hook-dir="$hooks" \
      --aptopt='Acquire::Languages "none"' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/groff/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
      --dpkgopt='path-exclude=/usr/share/linda/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      bookworm "$BASE.tmp" "$@" >"$log_file" 2>&1; then
    tail -n 30 "$log_file" >&2
    die "mmdebstrap failed (log: $log_file)"
  fi
  # What differs from one run to the next and means nothing in an image: logs, caches, backups, device nodes (the
  # runtime mounts /dev).
  find "$BASE.tmp/var/log" -type f -delete
  rm -rf "$BASE.tmp"/var/cache/apt/* "$BASE.tmp"/var/lib/apt/lists/* "$BASE.tmp"/var/cache/ldconfig/aux-cache \
    "$BASE.tmp"/var/cache/debconf/*-old "$BASE.tmp"/var/lib/dpkg/*-old "$BASE.tmp"/etc/*- "$BASE.tmp"/dev/* \
    "$BASE.tmp"/etc/hostname "$BASE.tmp"/etc/resolv.conf "$BASE.tmp"/etc/machine-id
  mkdir -p "$BASE.tmp/var/lib/apt/lists/partial" "$BASE.tmp/var/cache/apt/archives/partial"
  mv "$BASE.tmp" "$BASE"
}

layer_base() {
  LAYER="$CACHE/base.layer.tar"
  [ -n "${LAYER_DONE[base]:-}" ] && return
  local packages sources stamp
  packages="$(node "$HERE/images.js" base-packages)"
  mapfile -t sources < <(node "$HERE/images.js" apt-sources)
  stamp="$({ echo "recipe $RECIPE"; mmdebstrap --version; echo "$packages"; printf '%s\n' "${sources[@]}"; declare -f build_base_rootfs make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp" && [ -d "$BASE" ]; then
    log "base: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    log "base: mmdebstrap --variant=minbase bookworm + $packages from ${sources[0]#deb } (25-100 s)"
    timed "base: root file system" build_base_rootfs "$packages" "${sources[@]}"
    # shellcheck disable=SC2016 # expanded by the chroot's sh
    chroot "$BASE" sh -c 'curl --version && hostname --version && for c in getent tr sleep cat; do command -v "$c"; done' >/dev/null 2>&1 \
      || die "the base lacks curl, hostname, getent, tr or sleep (the chart's commands and hooks use them)"
    timed "base: layer $(du -sh "$BASE" | cut -f1)" make_layer "$BASE" "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[base]=1
}

# Runs a host binary against the base's libraries, not the host's: in_base BINARY ARGS...
in_base() {
  "$BASE/lib64/ld-linux-x86-64.so.2" --library-path "$BASE/usr/lib/x86_64-linux-gnu:$BASE/lib/x86_64-linux-gnu" "$@"
}

# What the layers on the base copy from it: its account files.
base_accounts() { cat "$BASE/etc/passwd" "$BASE/etc/group" "$BASE/etc/shadow" "$BASE/etc/gshadow" | hash_stdin; }

# The account files of the base with one more user/group appended: add_user STAGE NAME UID HOME SHELL GECOS.
add_user() {
  local stage="$1" name="$2" id="$3" home="$4" shell="$5" gecos="$6" f
  mkdir -p "$stage/etc"
  for f in passwd group shadow gshadow; do cp -p "$BASE/etc/$f" "$stage/etc/$f"; done
  printf '%s:x:%s:%s:%s:%s:%s\n' "$name" "$id" "$id" "$gecos" "$home" "$shell" >>"$stage/etc/passwd"
  printf '%s:x:%s:\n' "$name" "$id" >>"$stage/etc/group"
  printf '%s:!::0:99999:7:::\n' "$name" >>"$stage/etc/shadow"
  printf '%s:!::\n' "$name" >>"$stage/etc/gshadow"
}

# Node.js: what this machine's nodejs package installed (20.x, as the Dockerfile's FROM) but its headers and docs:
# the commands in /usr/bin and the trees under /usr/lib/node_modules (npm, corepack) as they are now (npm may have
# updated itself since: the package's file list would miss files), and the official node image's user node
# (1000:1000, /home/node, /bin/bash).
node_files() {
  local root
  printf '%s\n' /usr /usr/bin /usr/lib /usr/lib/node_modules
  dpkg -L nodejs | grep -E '^/usr/bin/[^/]+$|^/usr/lib/node_modules/[^/]+$' | sort -u | while IFS= read -r root; do
    if [ -L "$root" ] || [ -f "$root" ]; then printf '%s\n' "$root"; elif [ -d "$root" ]; then find "$root" | sort; fi
  done
}
build_node_layer() {
  local stage="$CACHE/node.stage"
  rm -rf "$stage"
  mkdir -p "$stage"
  node_files | sed 's|^/||' | tar -C / --create --file - --no-recursion --files-from - | tar -C "$stage" --extract --file - --same-permissions --same-owner
  add_user "$stage" node 1000 /home/node /bin/bash ''
  install -d -o 1000 -g 1000 -m 0755 "$stage/home/node"
  in_base "$stage/usr/bin/node" --version >/dev/null || die "node does not run on the base's libraries"
  make_layer "$stage" "$1"
  rm -rf "$stage"
}
layer_node() {
  layer_base
  LAYER="$CACHE/node.layer.tar"
  [ -n "${LAYER_DONE[node]:-}" ] && return
  local version want stamp
  version="$(node --version)"
  want="$(node "$HERE/images.js" dockerfile-node)"
  case "$version" in
    "v${want%%.*}".*) ;;
    *) die "node $version here; the Dockerfile's runtime stage is node $want (major ${want%%.*} needed)" ;;
  esac
  [ "$version" = "v$want" ] || log "node: note: $version here, the Dockerfile pins $want"
  stamp="$({ echo "recipe $RECIPE"; base_accounts; node_files | hash_list; declare -f node_files build_node_layer add_user make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp"; then
    log "node: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    timed "node: layer of $version" build_node_layer "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[node]=1
}

# The bundle, rebuilt by `npm run build` when it is missing or its sources changed since the last build here.
ensure_dist() {
  local inputs stamp_file="$CACHE/dist.inputs"
  inputs="$(cd "$REPO" && hash_paths src gate scripts/build.js package.json package-lock.json)"
  if [ -f "$REPO/dist/server.mjs" ] && [ -f "$REPO/dist/gate.mjs" ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$inputs" ]; then
    log "manager-app: dist/ up to date with src/, gate/ and the lockfile"
  else
    log "manager-app: npm run build (dist/ missing or older than its sources)"
    (cd "$REPO" && timed "manager-app: npm run build" npm run --silent build)
    if [ ! -f "$REPO/dist/server.mjs" ] || [ ! -f "$REPO/dist/gate.mjs" ]; then die "npm run build made no dist/server.mjs and dist/gate.mjs"; fi
    printf '%s\n' "$inputs" >"$stamp_file"
  fi
}
build_app_layer() {
  local stage="$CACHE/manager-app.stage"
  rm -rf "$stage"
  mkdir -p "$stage/app"
  cp -R "$REPO/dist" "$stage/app/dist"
  chown -R 0:0 "$stage"
  chmod -R u=rwX,go=rX "$stage"
  make_layer "$stage" "$1"
  rm -rf "$stage"
}
layer_manager_app() {
  LAYER="$CACHE/manager-app.layer.tar"
  [ -n "${LAYER_DONE[manager-app]:-}" ] && return
  ensure_dist
  local stamp
  stamp="$({ echo "recipe $RECIPE"; (cd "$REPO" && hash_paths dist); declare -f build_app_layer make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp"; then
    log "manager-app: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    timed "manager-app: layer" build_app_layer "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[manager-app]=1
}

# RethinkDB: the server binary at /usr/bin/rethinkdb (where the official image's package puts it), its copyright,
# /var/lib/rethinkdb owned by 1000:1000 (the Dockerfile's chown), and a rethinkdb user 1000 so that uid has a name.
RETHINKDB_BINARY="${RETHINKDB_BINARY:-$REPO/../shared/rethinkdb/rethinkdb}"
build_rethinkdb_layer() {
  local stage="$CACHE/rethinkdb.stage" notice
  rm -rf "$stage"
  install -D -m 0755 "$RETHINKDB_BINARY" "$stage/usr/bin/rethinkdb"
  notice="$(dirname "$RETHINKDB_BINARY")/COPYRIGHT"
  if [ -f "$notice" ]; then install -D -m 0644 "$notice" "$stage/usr/share/doc/rethinkdb/copyright"; fi
  add_user "$stage" rethinkdb 1000 /var/lib/rethinkdb /usr/sbin/nologin RethinkDB
  mkdir -p "$stage/var/lib"
  install -d -o 1000 -g 1000 -m 0755 "$stage/var/lib/rethinkdb"
  make_layer "$stage" "$1"
  rm -rf "$stage"
}
layer_rethinkdb() {
  layer_base
  LAYER="$CACHE/rethinkdb.layer.tar"
  [ -n "${LAYER_DONE[rethinkdb]:-}" ] && return
  [ -f "$RETHINKDB_BINARY" ] || die "no rethinkdb binary at $RETHINKDB_BINARY (set RETHINKDB_BINARY)"
  local version stamp
  version="$(in_base "$RETHINKDB_BINARY" --version 2>&1 | head -n 1)" || die "$RETHINKDB_BINARY does not run on the base's libraries: $version"
  case "$version" in
    "rethinkdb 2.4.4"*) ;;
    *) die "$RETHINKDB_BINARY is '$version', the image is 2.4.4" ;;
  esac
  stamp="$({ echo "recipe $RECIPE"; base_accounts; sha256sum "$RETHINKDB_BINARY" | cut -c1-64; [ ! -f "$(dirname "$RETHINKDB_BINARY")/COPYRIGHT" ] || sha256sum <"$(dirname "$RETHINKDB_BINARY")/COPYRIGHT"; declare -f build_rethinkdb_layer add_user make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp"; then
    log "rethinkdb: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    timed "rethinkdb: layer of $version" build_rethinkdb_layer "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[rethinkdb]=1
}

build_pause_layer() {
  local stage="$CACHE/pause.stage"
  rm -rf "$stage"
  mkdir -p "$stage"
  gcc -static -O2 -s -Wall -o "$stage/pause" "$HERE/pause.c"
  chmod 0755 "$stage/pause"
  make_layer "$stage" "$1"
  rm -rf "$stage"
}
layer_pause() {
  LAYER="$CACHE/pause.layer.tar"
  [ -n "${LAYER_DONE[pause]:-}" ] && return
  local stamp
  stamp="$({ echo "recipe $RECIPE"; sha256sum <"$HERE/pause.c"; gcc --version | head -n 1; declare -f build_pause_layer make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp"; then
    log "pause: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    timed "pause: gcc -static pause.c, layer" build_pause_layer "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[pause]=1
}

# A static Go binary alone at /<name>, with the CA bundle and a /tmp as in distroless/static; CoreDNS's gets
# cap_net_bind_service as upstream's image does (port 53 as uid 65534).
build_binary_layer() {
  local name="$1" binary="$2" out="$3" stage="$CACHE/$1.stage"
  rm -rf "$stage"
  mkdir -p "$stage/etc/ssl/certs"
  install -m 0755 "$binary" "$stage/$name"
  if [ "$name" = coredns ]; then setcap cap_net_bind_service=+ep "$stage/$name"; fi
  install -m 0644 /etc/ssl/certs/ca-certificates.crt "$stage/etc/ssl/certs/ca-certificates.crt"
  install -d -m 1777 "$stage/tmp"
  make_layer "$stage" "$out"
  rm -rf "$stage"
}
layer_binary() {
  local name="$1" binary="$2" stamp
  LAYER="$CACHE/$name.layer.tar"
  [ -n "${LAYER_DONE[$name]:-}" ] && return
  if ldd "$binary" >/dev/null 2>&1; then die "$binary is dynamically linked; its image has no libc (build it with CGO_ENABLED=0)"; fi
  stamp="$({ echo "recipe $RECIPE"; sha256sum <"$binary"; sha256sum </etc/ssl/certs/ca-certificates.crt; declare -f build_binary_layer make_layer; } | hash_stdin)"
  if fresh "$LAYER" "$stamp"; then
    log "$name: reused ($(layer_digest "$LAYER" | cut -c1-19))"
  else
    timed "$name: layer" build_binary_layer "$name" "$binary" "$LAYER"
    mark "$LAYER" "$stamp"
  fi
  LAYER_DONE[$name]=1
}

# --- Images ---

declare -a SUMMARY=()

build_image() {
  local name="$1" ref="$2" layers="$3" binary="$4" out="$OUT/$1.tar" spec="$CACHE/$1.spec.json" layer_tars=() stamp result digest
  if [ -n "$binary" ] && [ ! -f "$REPO/$binary" ]; then
    log "$name: SKIPPED, $binary is not built yet (lab/kube/build.sh makes it)$([ -f "$out" ] && echo "; out/$name.tar from an earlier binary left as it is")"
    SUMMARY+=("$(printf '%-15s %-62s %s' "$name" "$ref" "skipped: no $binary")")
    return
  fi
  IFS=, read -r -a layer_names <<<"$layers"
  for layer in "${layer_names[@]}"; do
    case "$layer" in
      base) layer_base ;;
      node) layer_node ;;
      manager-app) layer_manager_app ;;
      rethinkdb) layer_rethinkdb ;;
      pause) layer_pause ;;
      coredns|metrics-server) layer_binary "$layer" "$REPO/$binary" ;;
      *) die "$name: no recipe for layer $layer" ;;
    esac
    layer_tars+=("$LAYER")
  done
  node "$HERE/images.js" spec "$name" >"$spec.tmp" && mv "$spec.tmp" "$spec"
  stamp="$({ echo "recipe $RECIPE"; cat "$spec"; for t in "${layer_tars[@]}"; do layer_digest "$t"; done; cat "$HERE/oci.js" "$HERE/oci-tar.js"; echo "${SOURCE_DATE_EPOCH:-}"; } | hash_stdin)"
  if fresh "$out" "$stamp" && [ -f "$out.json" ]; then
    log "$name: reused out/$name.tar"
  else
    rm -f "$out" "$out.json" "$out.stamp"
    timed "$name: out/$name.tar" node "$HERE/oci-tar.js" --spec "$spec" --out "$out" "${layer_tars[@]}" >/dev/null
    mark "$out" "$stamp"
  fi
  result="$(cat "$out.json")"
  digest="$(node -e 'process.stdout.write(JSON.parse(process.argv[1]).digest)' "$result")"
  SUMMARY+=("$(printf '%-15s %-62s %s  %s' "$name" "$ref" "$digest" "$(human "$(stat -c %s "$out")")")")
}

mapfile -t IMAGE_LINES < <(node "$HERE/images.js" list)
declare -A KNOWN=()
for line in "${IMAGE_LINES[@]}"; do KNOWN["${line%%$'\t'*}"]=1; done
for name in "${SELECTED[@]}"; do [ -n "${KNOWN[$name]:-}" ] || die "no image $name; one of ${!KNOWN[*]}"; done

log "building into ${OUT#"$REPO/"}/ ${SELECTED[*]:-(all images)}"
for line in "${IMAGE_LINES[@]}"; do
  IFS=$'\t' read -r name ref layers binary <<<"$line"
  if [ "${#SELECTED[@]}" -gt 0 ] && [[ " ${SELECTED[*]} " != *" $name "* ]]; then continue; fi
  build_image "$name" "$ref" "$layers" "${binary:-}"
done

log "done; import with: ctr -n k8s.io images import lab/images/out/<name>.tar"
printf '%s\n' "${SUMMARY[@]}"
