# sluice.dev/redis:dev on the Docker path: Debian's redis-server, as the
# buildah path builds it from a debootstrap root filesystem.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
USER redis
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["redis-server"]
CMD ["--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data"]
