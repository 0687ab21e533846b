fn main() {
    serve::main_with_args(std::env::args_os())
}
