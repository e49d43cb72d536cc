# syntax=docker/dockerfile:1
# Node 24, the current LTS (package.json `engines`: 22.22+ or 24+; Node 20 reached end of life in
# April 2026). Debian 12 (bookworm), the system the tests run on.
ARG NODE_IMAGE=node:24-bookworm-slim

# Build stage: full deps, compile TypeScript.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm install, not npm ci: see .ci/run (the lockfile holds only the Linux optional builds).
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build

# Production dependencies only; the build fails if a dev dependency is among them.
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
RUN node -e "const fs=require('fs');const dev=Object.keys(require('./package.json').devDependencies||{}).filter(n=>fs.existsSync('node_modules/'+n));if(dev.length){console.error('dev dependencies in the production tree: '+dev.join(', '));process.exit(1)}"

# Runtime stage: production deps, the compiled code, config and docs; non-root.
FROM ${NODE_IMAGE} AS runtime
# Production: `serve` refuses to start without UPSTREAM_URL unless EMULATOR_EMBEDDED=true, and
# SIGTERM keeps serving SHUTDOWN_DELAY_MS (5 s) with /readyz 503 before draining.
ENV NODE_ENV=production
# glibc malloc: at most two arenas, and freed memory above 128 KiB handed back to the system. With
# its defaults, socket and response buffers freed on other threads stayed in per-thread arenas:
# about 145 KiB of RSS per legacy stream at 1,000 streams (bench/scale.ts), 50 KiB with these.
ENV MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config ./config
# The default deprecation Link points at the migration guide the gateway serves from docs/.
COPY docs ./docs
USER node
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# V8 grows the old generation by 30 % past what a full collection kept, not by its dynamic factor
# (up to 4×): a replica's garbage between collections is most of its RSS per stream. 1,000 / 2,000
# legacy streams on one process: 86 → 65 and 108 → 53 KiB per stream, CPU within the noise
# (bench/scale.ts, docs/scaling.md). And the young generation stays at 16 MiB per semi-space, where
# Node 24's V8 lets it grow with the heap: at 1,000 streams 135-137 → 57-65 KiB per stream, CPU
# unchanged (0.40 ms per stream-second either way). `npm start` runs with the same flags.
ENTRYPOINT ["node", "--heap-growing-percent=30", "--max-semi-space-size=16", "dist/main.js"]
CMD ["serve"]
