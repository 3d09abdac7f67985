# The upstream COSI sidecar (v0.2.2 for objectstorage.k8s.io/v1alpha1, main for v1alpha2), the
# static Go binary tests/cosi/build.sh builds offline; the same layout and user as upstream's.
FROM scratch
COPY sidecar /sidecar
USER 65532:65532
ENTRYPOINT ["/sidecar"]
