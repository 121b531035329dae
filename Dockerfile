# The rlmesh-runtime image, for those who build with a container engine. It
# is the same image `npm run image` builds without one: the build stage runs
# that same assembly (scripts/image/build.ts --rootfs: the Debian base from
# packages, the Node binary of the npm `node` package package.json pins, /app
# with the compiled JavaScript, and the V8 code cache beside each component),
# and the final stage is that folder and nothing else: no shell, no package
# manager. test/image/dockerfile.test.ts fails if this file and the
# engine-free build would differ (files, user, workdir, env, entrypoint).
# The engine-free build is what the release publishes: its layers are sorted,
# root-owned and dated by the commit, so one commit gives one digest.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node scripts/image/build.ts rlmesh-runtime --rootfs /rootfs

FROM scratch
COPY --from=build /rootfs /
USER 65532:65532
WORKDIR /app
ENV PATH=/usr/local/bin NODE_ENV=production
ENTRYPOINT ["/usr/local/bin/node", "--disable-warning=DEP0169", "--disable-warning=DEP0005", "--disable-warning=DEP0040", "/app/bin/rlmesh-runtime.js"]
