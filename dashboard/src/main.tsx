import { render } from "preact";
import { App } from "./app.js";
import "../../ui/base.css";
import "./style.css";

render(<App />, document.getElementById("app") as HTMLElement);
