#!/usr/bin/Rscript
# Writes the tabular evaluation sets as OUT/NAME.csv (OUT: the first argument,
# default ./tabular-data); usage: Rscript tools/tabular/make_data.R OUT
# (no header; each row: label,f1,...,fd; numeric features only; rows with NA dropped).
# Needs Debian packages r-cran-mlbench (pulls r-base-core) and python3-sklearn (for the
# bundled breast_cancer.csv and wine_data.csv).
suppressMessages(library(mlbench))
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args) >= 1) args[1] else "tabular-data"
dir.create(out, showWarnings = FALSE)
skl <- "/usr/lib/python3/dist-packages/sklearn/datasets/data"

write_set <- function(name, X, y) {
  X <- as.data.frame(X)
  for (j in seq_along(X)) {
    v <- X[[j]]
    if (is.factor(v)) {
      num <- suppressWarnings(as.numeric(as.character(v)))
      if (any(is.na(num) & !is.na(v))) num <- as.numeric(v)   # non-numeric levels -> codes
      X[[j]] <- num
    }
  }
  y <- gsub("[ ,]+", "_", as.character(y))
  ok <- complete.cases(X) & !is.na(y)
  X <- as.matrix(X[ok, , drop = FALSE]); y <- y[ok]
  storage.mode(X) <- "double"
  d <- data.frame(label = y, X, check.names = FALSE)
  write.table(d, file.path(out, paste0(name, ".csv")), sep = ",", row.names = FALSE,
              col.names = FALSE, quote = FALSE)
  cat(sprintf("%-16s rows=%5d features=%2d classes=%2d\n", name, nrow(X), ncol(X),
              length(unique(y))))
}

mlb <- function(name) { e <- new.env(); data(list = name, envir = e); get(name, envir = e) }

d <- mlb("LetterRecognition"); write_set("letter", d[, -1], d$lettr)
d <- mlb("Sonar");             write_set("sonar", d[, 1:60], d$Class)
# Ionosphere: V1 (0/1) and V2 (constant 0) are stored as factors -> numeric; 34 features kept.
d <- mlb("Ionosphere");        write_set("ionosphere", d[, 1:34], d$Class)
d <- mlb("Vehicle");           write_set("vehicle", d[, 1:18], d$Class)
d <- mlb("Satellite");         write_set("satellite", d[, 1:36], d$classes)
# Vowel: mlbench's V1 is the speaker id (0-14), dropped; V2..V10 are 9 of the 10 LPC
# log-area-ratio features (mlbench's copy lacks the original 2nd feature).
d <- mlb("Vowel");             write_set("vowel", d[, 2:10], d$Class)
d <- mlb("Glass");             write_set("glass", d[, 1:9], d$Type)
# Shuttle has 58,000 rows: seeded random subsample of 20,000 (set.seed(1)).
d <- mlb("Shuttle"); set.seed(1); idx <- sort(sample(nrow(d), 20000))
write_set("shuttle", d[idx, 1:9], d$Class[idx])

# Generators (each seeded with set.seed(1) right before the call).
set.seed(1); w <- mlbench.waveform(5000)
noise <- matrix(rnorm(5000 * 19), ncol = 19)        # 19 N(0,1) noise features, as in UCI waveform-+noise
write_set("waveform_noise", cbind(w$x, noise), w$classes)
set.seed(1); r <- mlbench.ringnorm(7400, d = 20); write_set("ringnorm", r$x, r$classes)
set.seed(1); t <- mlbench.twonorm(7400, d = 20);  write_set("twonorm", t$x, t$classes)

# scikit-learn bundled CSVs (first line is "n,d,classnames...", last column the class index).
rd_skl <- function(f) {
  hdr <- strsplit(readLines(file.path(skl, f), n = 1), ",")[[1]]
  x <- read.csv(file.path(skl, f), skip = 1, header = FALSE)
  nm <- hdr[-(1:2)]
  list(X = x[, -ncol(x)], y = nm[x[, ncol(x)] + 1])
}
b <- rd_skl("breast_cancer.csv"); write_set("breast_cancer", b$X, b$y)   # WDBC, 30 features
w <- rd_skl("wine_data.csv");     write_set("wine", w$X, w$y)
