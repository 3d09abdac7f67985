# The pod sandbox image: Kubernetes' pause program (tests/node/build.sh compiles it statically).
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
