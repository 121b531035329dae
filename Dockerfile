# One non-root image for every entrypoint: agent | controller | egress | controlplane | cli | gpu-discovery.
# Node 24 runs the TypeScript sources directly (type stripping), so the image
# carries sources and production dependencies only: no compiler, no dev tools.
# test/image/check.ts runs these same steps outside Docker on every CI run.
ARG NODE_IMAGE=node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
COPY bin ./bin
COPY lib ./lib
COPY agent ./agent
COPY controller ./controller
COPY egress ./egress
COPY controlplane ./controlplane
COPY cli ./cli
COPY gpu-discovery ./gpu-discovery
RUN find . -path ./node_modules -prune -o -name '*.test.ts' -print | xargs rm -f

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src /app
USER 65532:65532
ENTRYPOINT ["node", "/app/bin/rlmesh-runtime.ts"]
