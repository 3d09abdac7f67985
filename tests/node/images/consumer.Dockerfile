# The application of examples/consumer.rs, linked statically: it uses a claim through nothing
# but its environment.
FROM scratch
COPY bucket-consumer /usr/local/bin/bucket-consumer
ENV PATH=/usr/local/bin
USER 65532:65532
ENTRYPOINT ["bucket-consumer"]
