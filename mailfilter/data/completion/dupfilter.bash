# bash completion for dupfilter, dupfilter-db, dupfilter-milter, dupfilter-smtpd
# (generated from their --help by mailfilter/cli/manuals.py)

_dupfilter() {
    local cur prev words cword
    _init_completion || return
    case "$prev" in --db|--config) _filedir; return ;; esac
    COMPREPLY=($(compgen -W "-h --help --version --db --config --tag --check --no-record --json --recipient" -- "$cur"))
}
complete -F _dupfilter dupfilter

_dupfilter_db() {
    local cur prev words cword
    _init_completion || return
    case "$prev" in --db|--config) _filedir; return ;; esac
    local command= i
    for ((i = 1; i < cword; i++)); do
        case "${words[i]}" in
            import|scan|fingerprint|compare|explain|prune|stats|status|dedupe|verify|forget|config) command=${words[i]}; break ;;
        esac
    done
    case "$command" in
        import)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --jobs" -- "$cur")); else _filedir; fi ;;
        scan)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --json --no-record --jobs" -- "$cur")); else _filedir; fi ;;
        fingerprint)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --json --histogram" -- "$cur")); else _filedir; fi ;;
        compare)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --chunking --chunk-size --bins --json" -- "$cur")); else _filedir; fi ;;
        explain)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --json --recipient" -- "$cur")); else _filedir; fi ;;
        prune)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --older-than --dry-run --yes" -- "$cur")); else _filedir; fi ;;
        stats)
            case "$prev" in --db|--config|--plot) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --json --plot --days" -- "$cur")); else _filedir; fi ;;
        status)
            case "$prev" in --db|--config|--status-dir) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --status-dir --json" -- "$cur")); else _filedir; fi ;;
        dedupe)
            case "$prev" in --db|--config|--undo-log|--password-file|--tls-ca) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --near --across-folders --keep --action --to --keyword --expunge --dry-run --yes --json --undo-log --undo --password-file --tls-ca --rate" -- "$cur")); else _filedir; fi ;;
        verify)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config" -- "$cur")); else _filedir; fi ;;
        forget)
            case "$prev" in --db|--config) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --message-id --near --dry-run" -- "$cur")); else _filedir; fi ;;
        config)
            case "$prev" in --db|--config|--postfix) _filedir; return ;; esac
            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-h --help --db --config --check --show --changed --postfix --user --mta-user" -- "$cur")); else _filedir; fi ;;
        "") COMPREPLY=($(compgen -W "import scan fingerprint compare explain prune stats status dedupe verify forget config -h --help --version --db --config" -- "$cur")) ;;
    esac
}
complete -F _dupfilter_db dupfilter-db

_dupfilter_milter() {
    local cur prev words cword
    _init_completion || return
    case "$prev" in --config|--db|--status-dir) _filedir; return ;; esac
    COMPREPLY=($(compgen -W "-h --help --version --config --db --user --allow-root --store-retry --status-dir --instance --socket --sync-record --no-tcp-fixes" -- "$cur"))
}
complete -F _dupfilter_milter dupfilter-milter

_dupfilter_smtpd() {
    local cur prev words cword
    _init_completion || return
    case "$prev" in --config|--db|--status-dir) _filedir; return ;; esac
    COMPREPLY=($(compgen -W "-h --help --version --config --db --user --allow-root --store-retry --status-dir --instance --listen --next-hop --connections" -- "$cur"))
}
complete -F _dupfilter_smtpd dupfilter-smtpd
