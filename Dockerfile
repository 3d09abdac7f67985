# Both provisioner binaries on a small, non-root runtime image.
#   docker build -t bucket-provisioner .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
        -p hostpath-provisioner --bin hostpath-bucket-provisioner \
        -p s3-provisioner --bin s3-bucket-provisioner \
 && mkdir /out \
 && cp target/release/hostpath-bucket-provisioner target/release/s3-bucket-provisioner /out/

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9000
ENTRYPOINT []
CMD ["hostpath-bucket-provisioner"]
