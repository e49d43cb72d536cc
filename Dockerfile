# syntax=docker/dockerfile:1
# Build stage: full deps, compile TypeScript.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm install, not npm ci: see .ci/run (the lockfile holds only the Linux optional builds).
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime stage: production deps only, non-root.
FROM node:20-bookworm-slim AS runtime
# Production: `serve` refuses to start without UPSTREAM_URL unless EMULATOR_EMBEDDED=true, and
# SIGTERM keeps serving SHUTDOWN_DELAY_MS (5 s) with /readyz 503 before draining.
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# The default deprecation Link points at the migration guide the gateway serves from docs/.
COPY docs ./docs
USER node
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/main.js"]
CMD ["serve"]
