# The init container's script: `sh -c "$(this)" init-dirs DIR...` (POSIX sh, coreutils).
# Creates each directory cronsafe needs on the data volume. When one cannot be created or
# written, it says why in terms the user can act on (which path, who owns it, its mode, who
# we run as, the three fixes) and exits 78, which the Job's podFailurePolicy turns into an
# immediate failure: retrying cannot fix a volume's ownership, it only burns backoffLimit.
set -u
uid=$(id -u)
gid=$(id -g)
groups=$(id -G)
for dir in "$@"; do
  # Writable and searchable: cronsafe creates files in it (outputs, the ledger, temp files).
  if mkdir -p -- "$dir" 2>/dev/null && [ -w "$dir" ] && [ -x "$dir" ]; then
    continue
  fi
  # The deepest path that exists is the one that stops us.
  blocker=$dir
  while [ ! -e "$blocker" ] && [ "$blocker" != / ]; do blocker=$(dirname -- "$blocker"); done
  if [ -e "$blocker" ] && [ ! -d "$blocker" ]; then
    printf 'cronsafe init-dirs: cannot create the directory %s: %s exists and is not a directory. Remove or rename it, or point the config at another path.\n' "$dir" "$blocker" >&2
    exit 78
  fi
  owner=$(stat -c '%u:%g' -- "$blocker" 2>/dev/null || echo '?')
  mode=$(stat -c '%a' -- "$blocker" 2>/dev/null || echo '?')
  # printf, not a here-document: some shells write those to a temp file, and the
  # root filesystem is read-only with no /tmp mounted here.
  {
    printf 'cronsafe init-dirs: cannot create or write the directory %s: %s is owned by uid:gid %s with mode %s, and this container runs as uid %s, gid %s (groups: %s).\n' \
      "$dir" "$blocker" "$owner" "$mode" "$uid" "$gid" "$groups"
    printf 'The volume ignores the pod'"'"'s fsGroup (hostPath, many NFS and CSI drivers, a root-owned existingClaim). Fix one of:\n'
    printf '  1. use a volume type that applies podSecurityContext.fsGroup, or make the volume writable for gid %s;\n' "$gid"
    printf '  2. pre-create %s owned by (or writable for) uid %s on the volume;\n' "$dir" "$uid"
    printf '  3. create the directories yourself and drop this init container (Helm: initDirs.enabled: false).\n'
    printf 'See docs/kubernetes.md, "Volumes that ignore fsGroup".\n'
  } >&2
  exit 78
done
