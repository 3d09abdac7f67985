# The provisioner binaries on an empty, non-root image: statically linked, with the CA
# certificates of Debian's ca-certificates package for TLS to S3 services.
#
# It needs no registry: the build context is dist/image/, which `make image` fills with the
# static binaries and the CA bundle before it builds this file with buildah, as
#   buildah bud -f Dockerfile -t IMAGE dist/image
# `docker build -f Dockerfile -t IMAGE dist/image` builds the same image from that context.
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY hostpath-bucket-provisioner s3-bucket-provisioner hostpath-volume-provisioner \
     garage-bucket-provisioner /usr/local/bin/
ENV PATH=/usr/local/bin
USER 65532:65532
EXPOSE 8080 9000
CMD ["hostpath-bucket-provisioner"]
