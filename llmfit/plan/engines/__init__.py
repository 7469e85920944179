"""One estimator per engine, each sizing what one card holds the way that engine does."""
