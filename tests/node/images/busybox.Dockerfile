# A shell and the usual tools for init containers: Debian's busybox-static.
FROM scratch
COPY bin/ /bin/
ENV PATH=/bin
CMD ["sh"]
