# The upstream COSI sidecar (v0.2.2, objectstorage.k8s.io/v1alpha1), the static Go binary
# tests/cosi/build.sh builds offline; the same layout and user as the upstream image.
FROM scratch
COPY sidecar /sidecar
USER 65532:65532
ENTRYPOINT ["/sidecar"]
