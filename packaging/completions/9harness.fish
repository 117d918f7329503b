# fish completion for 9harness.
#
# Commands and the flags that take a value are written here; the flags of
# each command come from its --help (9harness __complete flags CMD), and
# the candidates only the daemon or your files know from
# `9harness __complete KIND PREFIX`: agents (HARNESS/PID) for move and
# wait, tree paths for ls, cat and stat, harnesses for --harness, and hosts
# (the Host lines of ~/.ssh/config, ~/.config/9harness/hosts) for --ssh.

function __9harness_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l nh $tokens[1]
    set -l commands ps top wait events notify move mount umount ls cat stat relay version help
    # The flags that take a value (the next word is theirs).
    set -l valued -s --socket --ssh --ssh-opt --ssh-cmd --aname --harness --format --sort --notify --state --timeout --hosts --config -n --interval
    set -l reach
    set -l cmd
    set -l dashdash
    set -l nops 0
    set -l prev
    set -l n (count $tokens)

    # Walk the words before the cursor: the global flags that say which
    # daemon to ask, the command, and the operands before the cursor.
    set -l i 2
    while test $i -le $n
        set -l w $tokens[$i]
        if test -n "$dashdash"; or not string match -q -- '-*' $w; or test "$w" = -
            if test -z "$cmd"
                set cmd $w
            else
                set nops (math $nops + 1)
            end
        else if test "$w" = --
            set dashdash 1
        else if contains -- $w -s --socket --ssh --ssh-opt --ssh-cmd --aname
            set i (math $i + 1)
            if test $i -le $n
                set -a reach $w $tokens[$i]
            else
                set prev $w
            end
        else if string match -qr -- '^--(socket|ssh|ssh-opt|ssh-cmd|aname)=' $w
            set -a reach $w
        else if contains -- $w $valued
            set i (math $i + 1)
            test $i -gt $n; and set prev $w
        end
        set i (math $i + 1)
    end

    switch "$prev"
        case -s --socket --hosts --config
            __fish_complete_path $cur
            return
        case --ssh
            $nh __complete hosts 2>/dev/null
            return
        case --harness
            $nh $reach __complete harnesses 2>/dev/null
            return
        case --state
            printf '%s\n' waiting idle working
            return
        case --sort
            $nh __complete sort 2>/dev/null
            return
        case --ssh-opt --ssh-cmd --aname --format --notify --timeout -n --interval
            return
    end

    if test -z "$dashdash"; and string match -q -- '-*' $cur
        if test -z "$cmd"
            $nh __complete flags 2>/dev/null
        else
            # The command's flags, then the global ones it also takes.
            $nh __complete flags $cmd 2>/dev/null
            $nh __complete flags 2>/dev/null | string match -v -r -- '^(-h|--help|--version)$'
        end
        return
    end

    if test -z "$cmd"
        printf '%s\n' $commands
        return
    end
    switch $cmd
        case move
            test $nops -eq 0; and $nh $reach __complete agents 2>/dev/null
        case wait
            $nh $reach __complete agents 2>/dev/null
        case ls cat stat
            $nh $reach __complete paths $cur 2>/dev/null
        case mount umount
            __fish_complete_directories $cur
        case help
            test $nops -eq 0; and printf '%s\n' $commands
    end
end

complete -c 9harness -f -a '(__9harness_complete)'
