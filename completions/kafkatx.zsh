#compdef kafkatx

_kafkatx_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _KAFKATX_COMPLETE=complete_zsh kafkatx)
}

compdef _kafkatx_completion kafkatx
