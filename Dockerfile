# The provisioner binaries on an otherwise empty, non-root image: statically linked, with the
# CA certificates of Debian's ca-certificates package for TLS to S3 services, and the programs
# the volume provisioner runs to hold volumes to their capacity (btrfs, mkfs.ext4, resize2fs,
# mkfs.xfs, xfs_growfs, mount, umount, losetup from Debian's btrfs-progs, e2fsprogs, xfsprogs
# and util-linux, with the libraries they link, about 7 MiB; tests/volumes/rootfs.sh).
#
# It needs no registry: the build context is dist/image/, which `make image` fills with the
# static binaries, the CA bundle and rootfs/ before it builds this file with buildah, as
#   buildah bud -f Dockerfile -t IMAGE dist/image
# `docker build -f Dockerfile -t IMAGE dist/image` builds the same image from that context.
FROM scratch
COPY rootfs/ /
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY hostpath-bucket-provisioner s3-bucket-provisioner hostpath-volume-provisioner \
     garage-bucket-provisioner /usr/local/bin/
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
USER 65532:65532
EXPOSE 8080 9000
CMD ["hostpath-bucket-provisioner"]
