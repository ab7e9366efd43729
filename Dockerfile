# syntax=docker/dockerfile:1
# The Safety Incident API's image: configured by environment only (README, "Configuration"), one
# process per container, SQLite in the /data volume unless DATABASE_URL names PostgreSQL.
# docs/deployment.md walks through it; test/deploy/dockerfile.test.ts checks what it promises.

# ---- build: production dependencies (better-sqlite3 built here) and the bundle
FROM node:24-bookworm-slim AS build
# better-sqlite3's install step runs node-gyp, which needs Python and make even where the package
# carries a prebuilt binary (linux x64 and arm64), and a C++ compiler on other platforms.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# node-gyp builds against the image's own Node.js headers instead of downloading them.
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json ./
# Production dependencies only: the bundle needs esbuild, which is one of them. Lifecycle scripts
# are skipped (the package's `prepare` builds, before the sources are here), then better-sqlite3's
# own is run.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm rebuild better-sqlite3
COPY . .
RUN npm run build

# ---- runtime: what `safety-api` needs to run, nothing to build with
FROM node:24-bookworm-slim
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="safety-incident-api" \
  org.opencontainers.image.description="Public REST API of a workplace-safety platform: incidents, users, departments and locations by API key; admin panel; OAuth 2." \
  org.opencontainers.image.version="1.0.0" \
  org.opencontainers.image.licenses="UNLICENSED" \
  org.opencontainers.image.source="${SOURCE_URL}"
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY --from=build /app/src/admin/assets ./src/admin/assets
# The only place the server writes: the SQLite database (and its -wal and -shm files). Everything
# else may be a read-only root filesystem.
RUN mkdir /data && chown node:node /data && ln -s /app/bin/safety-api.js /usr/local/bin/safety-api
VOLUME /data
# A young generation of 32 MB instead of up to 128 MB, at no measured cost in speed (README, "Memory").
ENV DATABASE_URL=sqlite:/data/safety-api.db \
  PORT=8080 \
  NODE_OPTIONS=--max-semi-space-size=16
USER node
EXPOSE 8080
# The server drains on SIGTERM: in-flight requests finish, buffered counts are written, exit 0
# within 10 s (docs/operations.md, "Shutdown").
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["safety-api", "healthcheck"]
ENTRYPOINT ["safety-api"]
CMD ["serve"]
