# Sourced by .ci/build.sh and .ci/manylinux.sh: what counts as a warning in a build log.
#
#   build_warnings LOG    prints the log's warning lines (nothing when it has none)
#
# A warning is a diagnostic -- a compiler's "file:line: warning:", zig's "warning(link):",
# setuptools' "warning: no files found ...", pip's "DEPRECATION:", a Python warning class ("SetuptoolsDeprecationWarning:"),
# a log level ("WARNING"), a deprecation notice -- never a file name that holds the word
# (csrc/types/warn.c, tests/test_warnings.py are copied, compiled and linked by name).
# Ignored: pip's notes about this machine's local index configuration
# ("WARNING: Location '...' is ignored"), which are not ours.
build_warnings() {
    grep -E "[Ww]arning[:(]|[A-Za-z]Warning\b|WARNING|[Dd]eprecat|DEPRECAT" "$1" \
        | grep -vE "^ *WARNING: Location '[^']*' is ignored: it is neither a file nor a directory\.$" \
        || true
}
