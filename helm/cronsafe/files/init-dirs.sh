# The init container's script: `sh -c "$(this)" init-dirs [--readable DIR] DIR...` (POSIX
# sh, coreutils). Creates each directory cronsafe needs on the data volume. When one cannot
# be created or used, it says why in terms the user can act on (which path, who owns it, its
# mode, who we run as, the three fixes) and exits 78, which the Job's podFailurePolicy turns
# into an immediate failure: retrying cannot fix a volume's ownership, it only burns
# backoffLimit.
set -u
uid=$(id -u)
gid=$(id -g)
groups=$(id -G)
need=write
for dir in "$@"; do
  if [ "$dir" = --readable ]; then
    need=read
    continue
  fi
  if [ "$need" = read ]; then
    # The source: cronsafe only reads it, so an existing one (say, a producer's, on a volume
    # that ignores fsGroup) needs read and search only. A missing one is created.
    if { [ -d "$dir" ] || mkdir -p -- "$dir" 2>/dev/null; } && [ -r "$dir" ] && [ -x "$dir" ]; then
      need=write
      continue
    fi
  # Writable and searchable: cronsafe creates files in it (outputs, the ledger, temp files).
  elif mkdir -p -- "$dir" 2>/dev/null && [ -w "$dir" ] && [ -x "$dir" ]; then
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
  able=writable
  [ "$need" = read ] && able=readable
  # printf, not a here-document: some shells write those to a temp file, and the
  # root filesystem is read-only with no /tmp mounted here.
  {
    printf 'cronsafe init-dirs: cannot create or %s the directory %s: %s is owned by uid:gid %s with mode %s, and this container runs as uid %s, gid %s (groups: %s).\n' \
      "$need" "$dir" "$blocker" "$owner" "$mode" "$uid" "$gid" "$groups"
    printf 'The volume ignores the pod'"'"'s fsGroup (hostPath, many NFS and CSI drivers, a root-owned existingClaim). Fix one of:\n'
    printf '  1. use a volume type that applies podSecurityContext.fsGroup, or make the volume writable for gid %s;\n' "$gid"
    printf '  2. pre-create %s owned by (or %s for) uid %s on the volume;\n' "$dir" "$able" "$uid"
    printf '  3. create the directories yourself and drop this init container (Helm: initDirs.enabled: false).\n'
    printf 'See docs/kubernetes.md, "Volumes that ignore fsGroup".\n'
  } >&2
  exit 78
done
