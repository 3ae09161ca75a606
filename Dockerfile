# The manager's container image: built from the lockfile in one stage (`npm ci`, then `npm run build` bundles
# src/server.js into dist/ with esbuild, scripts/build.js), and only that bundle copied into a clean runtime stage that
# runs as the unprivileged "node" user (uid 1000) with node itself as PID 1. The bundle holds every dependency, so the
# runtime stage has no node_modules.
# Base: Node 20 on Debian bookworm-slim, pinned by version and by digest (see docs/kubernetes.md).

FROM node:20.20.2-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0 AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY scripts/build.js ./scripts/
COPY src ./src
COPY gate ./gate
RUN npm run build

FROM node:20.20.2-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0
ENV NODE_ENV=production
# package.json's version (test/deploy/release.test.js checks that they agree, and the manifests' image tag too).
LABEL org.opencontainers.image.title="rethinkdb-k8s-manager" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
# V8's young generation at most 2 MiB per semi-space (the default is 16): a burst of requests otherwise grows it to
# 2 x 16 MiB, which stays committed long after the burst. Measured by bench/memory.bench.js (which starts the manager
# with this image's ENV) on the sandbox, 50,000 reads and 5,000 hooks: peak RSS 143 -> 112 MiB, RSS 30 s after the
# load 104 -> 76 MiB; the price is more young-generation GCs, about 20 % more CPU under load (16.2 -> 19.5 CPU s
# for 50,000 reads).
ENV NODE_OPTIONS=--max-semi-space-size=2
WORKDIR /app
# The bundle: dist/server.mjs, its chunks (the Kubernetes client and the rethinkdb driver load only with the backend
# that uses them) and dist/assets/ (package.json for the version, the status page), read relative to the chunks.
COPY --from=build /app/dist ./dist
USER 1000:1000
EXPOSE 8080
# Exec form: node is PID 1 and receives SIGTERM itself; the manager handles it (stop accepting, finish in-flight
# actions, close clients). It starts no child processes, so no init is needed to reap them. The bundle, not src/:
# @kubernetes/client-node's index loads every generated API and model module (53 MiB of resident memory, measured once), the
# bundle only the code the adapter uses (see docs/benchmarks.md > "Memory").
CMD ["node", "dist/server.mjs"]
