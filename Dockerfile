# The manager's container image: dependencies installed from the lockfile in one stage, copied into a clean
# runtime stage that runs as the unprivileged "node" user (uid 1000) with node itself as PID 1.
# Base: Node 20 on Debian bookworm-slim, pinned by version and by digest (see README, "Deploy on Kubernetes").

FROM node:20.20.2-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0 AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20.20.2-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
USER 1000:1000
EXPOSE 8080
# Exec form: node is PID 1 and receives SIGTERM itself; src/server.js handles it (stop accepting, finish
# in-flight actions, close clients). The manager starts no child processes, so no init is needed to reap them.
CMD ["node", "src/server.js"]
