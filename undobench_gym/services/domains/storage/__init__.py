"""Storage: an S3-like object store (buckets, versioned objects, multipart uploads)."""
