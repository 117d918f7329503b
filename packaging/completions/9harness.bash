# bash completion for 9harness                           -*- shell-script -*-
#
# Commands and the flags that take a value are written here; the flags of
# each command come from its --help (9harness __complete flags CMD), and
# the candidates only the daemon or your files know from
# `9harness __complete KIND PREFIX`: agents (HARNESS/PID) for move and
# wait, tree paths for ls, cat and stat, harnesses for --harness, and hosts
# (the Host lines of ~/.ssh/config, ~/.config/9harness/hosts) for --ssh.

_9harness() {
	local cur prev words cword
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	local nh=${COMP_WORDS[0]}
	local commands='ps top wait events notify move mount umount ls cat stat relay version help'
	# The flags that take a value (the next word is theirs).
	local valued=' -s --socket --ssh --ssh-opt --ssh-cmd --aname --harness --format --sort --notify --state --timeout --hosts --config -n --interval '

	# Walk the words before the cursor: the global flags that say which
	# daemon to ask, the command, and the operands before the cursor.
	local -a reach=()
	local cmd= nops=0 i w dashdash=
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ -n $dashdash || $w != -* || $w == - ]]; then
			if [[ -z $cmd ]]; then cmd=$w; else ((nops++)); fi
			continue
		fi
		# bash splits --flag=value into three words: --flag = value.
		local v=${COMP_WORDS[i + 1]}
		if [[ $v == = ]]; then
			v=${COMP_WORDS[i + 2]}
			((i++))
		fi
		case $w in
		--) dashdash=1 ;;
		-s | --socket | --ssh | --ssh-opt | --ssh-cmd | --aname)
			reach+=("$w" "$v")
			((i++))
			;;
		*)
			[[ $valued == *" $w "* ]] && ((i++))
			;;
		esac
	done

	COMPREPLY=()
	# After --flag= the word before the cursor is "=".
	[[ $prev == = ]] && ((COMP_CWORD > 1)) && prev=${COMP_WORDS[COMP_CWORD - 2]}
	[[ $cur == = ]] && cur=
	case $prev in
	-s | --socket | --hosts | --config)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--ssh)
		COMPREPLY=($(compgen -W "$("$nh" __complete hosts 2>/dev/null)" -- "$cur"))
		return
		;;
	--harness)
		COMPREPLY=($(compgen -W "$("$nh" "${reach[@]}" __complete harnesses 2>/dev/null)" -- "$cur"))
		return
		;;
	--state)
		COMPREPLY=($(compgen -W "waiting idle working" -- "$cur"))
		return
		;;
	--sort)
		COMPREPLY=($(compgen -W "$("$nh" __complete sort 2>/dev/null)" -- "$cur"))
		return
		;;
	--ssh-opt | --ssh-cmd | --aname | --format | --notify | --timeout | -n | --interval)
		return
		;;
	esac

	if [[ -z $dashdash && $cur == -* ]]; then
		local flags f
		if [[ -z $cmd ]]; then
			flags=$("$nh" __complete flags 2>/dev/null)
		else
			# The command's flags, then the global ones it also takes.
			flags=$("$nh" __complete flags "$cmd" 2>/dev/null)
			for f in $("$nh" __complete flags 2>/dev/null); do
				case $f in -h | --help | --version) ;; *) flags+=" $f" ;; esac
			done
		fi
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi

	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		return
	fi
	local IFS=$'\n'
	case $cmd in
	move)
		((nops == 0)) && COMPREPLY=($(compgen -W "$("$nh" "${reach[@]}" __complete agents 2>/dev/null)" -- "$cur"))
		;;
	wait)
		COMPREPLY=($(compgen -W "$("$nh" "${reach[@]}" __complete agents 2>/dev/null)" -- "$cur"))
		;;
	ls | cat | stat)
		COMPREPLY=($("$nh" "${reach[@]}" __complete paths "$cur" 2>/dev/null))
		# A directory is a step on the way: no space after it.
		[[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]] && compopt -o nospace 2>/dev/null
		;;
	mount | umount)
		COMPREPLY=($(compgen -d -- "$cur"))
		;;
	help)
		IFS=$' \t\n'
		((nops == 0)) && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
		;;
	esac
}

complete -F _9harness 9harness
